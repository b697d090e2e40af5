<?php
/**
 * Messages and small helpers the contract sections share.
 *
 * @package Convograph
 */

declare( strict_types=1 );

/**
 * Agents API's message envelope, as WordPress code builds it (PHP arrays).
 *
 * @param array<mixed> $payload
 * @return array<string,mixed>
 */
function contract_envelope( string $type, string $role, mixed $content, array $payload = array() ): array {
	return array(
		'schema'   => 'agents-api.message',
		'version'  => 1,
		'type'     => $type,
		'role'     => $role,
		'content'  => $content,
		'payload'  => $payload,
		'metadata' => array( 'ts' => '2025-05-01T12:00:00Z' ),
	);
}

/**
 * One of every envelope type, plus a plain message, with the values PHP must get back exactly:
 * floats with and without a fraction, PHP_INT_MAX, empty arrays, nested lists, NUL, emoji.
 *
 * @return list<array<string,mixed>>
 */
function contract_all_envelopes(): array {
	return array(
		contract_envelope( 'text', 'user', 'Refund order #1001, please.' ),
		contract_envelope( 'tool_call', 'assistant', '', array( 'tool' => 'orders.lookup', 'arguments' => array( 'id' => 1001 ) ) ),
		contract_envelope( 'tool_result', 'tool', '', array( 'result' => array( 'total' => 49.9, 'paid' => true, 'refund' => 1.0, 'notes' => null ) ) ),
		contract_envelope( 'input_required', 'assistant', 'Which card?', array( 'fields' => array( 'card_last4' ) ) ),
		contract_envelope( 'approval_required', 'assistant', 'Refund 49.90?', array( 'action' => 'refund', 'amount' => 4990 ) ),
		contract_envelope( 'delta', 'assistant', 'Refun', array( 'index' => 0 ) ),
		contract_envelope( 'multimodal_part', 'user', array( array( 'type' => 'image', 'url' => 'https://example.test/r.png' ) ), array( 'bytes' => PHP_INT_MAX, 'min' => PHP_INT_MIN ) ),
		contract_envelope( 'error', 'system', 'gateway timeout', array( 'code' => 504, 'retryable' => true ) ),
		contract_envelope( 'final_result', 'assistant', 'Refunded. 🎉 Grüße, 你好', array( 'nested' => array( 'z' => 1, 'a' => null, 'empty' => array() ) ) ),
		array(
			'role'     => 'user',
			'content'  => "thanks\u{0000}!\n\"quoted\" \\ </script>",
			'metadata' => array(
				'channel' => 'rest',
				'n'       => -12.5,
			),
		),
	);
}

/** @return list<array<string,mixed>> */
function contract_turns( string $tag, int $count ): array {
	$turns = array();
	for ( $i = 0; $i < $count; $i++ ) {
		$turns[] = contract_envelope( 'text', 0 === $i % 2 ? 'user' : 'assistant', "{$tag} turn {$i}" );
	}
	return $turns;
}

/**
 * The ids of rows, in order.
 *
 * @param array<int,array<string,mixed>> $rows
 * @return list<string>
 */
function contract_ids( array $rows ): array {
	return array_values( array_map( static fn ( array $row ): string => (string) ( $row['session_id'] ?? '' ), $rows ) );
}

/** A port on 127.0.0.1 nobody listens on (bound, then released). */
function contract_closed_port(): int {
	$server = stream_socket_server( 'tcp://127.0.0.1:0' );
	if ( false === $server ) {
		throw new RuntimeException( 'cannot bind a probe socket' );
	}
	$name = (string) stream_socket_get_name( $server, false );
	fclose( $server );
	return (int) substr( $name, strrpos( $name, ':' ) + 1 );
}

/**
 * Messages as they travel (each an object), to tell the pytest what GraphQL must return.
 *
 * @param array<mixed> $messages
 * @return list<object>
 */
function contract_wire_messages( array $messages ): array {
	return array_map( static fn ( array $m ): object => (object) $m, array_values( $messages ) );
}
