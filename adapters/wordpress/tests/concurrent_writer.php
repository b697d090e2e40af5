<?php
/**
 * One concurrent writer process for the contract's concurrency section (its own PHP process,
 * as two PHP-FPM workers are). Prints one JSON line with what it did.
 *
 *   php concurrent_writer.php replace SESSION_ID WRITER ROUNDS START_AT
 *       writes its own complete transcript (6 turns) ROUNDS times, unlocked
 *   php concurrent_writer.php append SESSION_ID WRITER TURNS START_AT
 *       appends TURNS turns, each under the session lock: acquire (retrying while contended),
 *       read, append, update_session, release
 *   php concurrent_writer.php read_modify SESSION_ID WRITER 1 START_AT
 *       reads the session at once, then at START_AT adds one turn and saves, unlocked (Agents
 *       API's get, modify, update); says how many messages it read, and what it logged
 *
 * START_AT (a microtime) lines the writers up so that they really overlap.
 *
 * @package Convograph
 */

declare( strict_types=1 );

require_once __DIR__ . '/lib/environment.php';
require_once __DIR__ . '/lib/fixtures.php';

/** @return array<string,mixed> */
function writer_replace( Convograph_Conversation_Store $store, string $sid, int $writer, int $rounds ): array {
	$ok = 0;
	for ( $i = 0; $i < $rounds; $i++ ) {
		$ok += $store->update_session( $sid, contract_turns( "writer {$writer}", 6 ) ) ? 1 : 0;
	}
	return array( 'saved' => $ok );
}

/** @return array<string,mixed> */
function writer_append( Convograph_Conversation_Store $store, string $sid, int $writer, int $turns ): array {
	$saved    = 0;
	$waits    = 0;
	$deadline = microtime( true ) + 30;
	for ( $k = 0; $k < $turns; $k++ ) {
		$lock = $store->acquire_session_lock( $sid, 10 );
		while ( null === $lock && microtime( true ) < $deadline ) {
			++$waits;
			usleep( random_int( 2000, 15000 ) );
			$lock = $store->acquire_session_lock( $sid, 10 );
		}
		if ( null === $lock ) {
			break;
		}
		$messages   = ( $store->get_session( $sid ) ?? array() )['messages'] ?? array();
		$messages[] = contract_envelope( 'text', 'user', "worker {$writer} turn {$k}" );
		$saved     += $store->update_session( $sid, $messages ) ? 1 : 0;
		$store->release_session_lock( $sid, $lock );
	}
	return array(
		'saved'      => $saved,
		'lock_waits' => $waits,
	);
}

/**
 * @param array<mixed> $read The transcript as this writer read it, before START_AT.
 * @return array<string,mixed>
 */
function writer_read_modify( Convograph_Conversation_Store $store, string $sid, int $writer, array $read ): array {
	$messages          = $read;
	$messages[]        = contract_envelope( 'text', 'assistant', "worker {$writer} read-modify turn" );
	[ $saved, $logged ] = ( new Contract_Log() )->during( fn (): bool => $store->update_session( $sid, $messages ) );
	return array(
		'saved'  => $saved ? 1 : 0,
		'read'   => count( $read ),
		'logged' => $logged,
	);
}

[ , $mode, $sid, $writer, $count, $start_at ] = $argv + array_fill( 0, 6, '' );
$env   = Contract_Environment::from_env();
$store = $env->store();
$read  = 'read_modify' === $mode ? ( ( $store->get_session( $sid ) ?? array() )['messages'] ?? array() ) : array();
time_sleep_until( max( microtime( true ) + 0.001, (float) $start_at ) );
$result = match ( $mode ) {
	'append'      => writer_append( $store, $sid, (int) $writer, (int) $count ),
	'read_modify' => writer_read_modify( $store, $sid, (int) $writer, $read ),
	default       => writer_replace( $store, $sid, (int) $writer, (int) $count ),
};
echo json_encode( $result + array( 'writer' => (int) $writer ) ), "\n";
