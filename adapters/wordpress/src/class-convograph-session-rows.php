<?php
/**
 * convograph Conversation <-> Agents API session row, in both directions.
 *
 * @package Convograph
 */

declare( strict_types=1 );

final class Convograph_Session_Rows {

	/**
	 * The Conversation fields a session row is made of (`transcript` is added when wanted), and
	 * `version`, which the store keeps for itself (update_session's expectedVersion).
	 */
	public const FIELDS = 'id title agentSlug context metadata provider model providerResponseId
		workspace { type id } ownerType createdAt updatedAt lastReadAt expiresAt version';

	/**
	 * The row Agents API's bundled store returns, from a Conversation node.
	 *
	 * `$owner` is the owner as the caller named it; with null (a method that gets only a session
	 * id) the owner key is unknown, since convograph keeps only a keyed digest of it: `owner_key`
	 * is then '' and `user_id` 0, and `owner_type` is the stored one.
	 *
	 * @param array<string,mixed>                $node  Conversation fields (FIELDS, maybe transcript).
	 * @param array{type:string,key:string}|null $owner
	 * @return array<string,mixed>
	 */
	public static function from_node( array $node, ?array $owner, bool $with_messages ): array {
		$owner_type = null !== $owner ? $owner['type'] : strtolower( (string) ( $node['ownerType'] ?? '' ) );
		$owner_key  = null !== $owner ? $owner['key'] : '';
		$metadata   = is_array( $node['metadata'] ?? null ) ? $node['metadata'] : array();
		$context    = (string) ( $node['context'] ?? 'chat' );

		$row = array(
			'session_id'     => (string) ( $node['id'] ?? '' ),
			'workspace_type' => (string) ( $node['workspace']['type'] ?? '' ),
			'workspace_id'   => (string) ( $node['workspace']['id'] ?? '' ),
			'owner_type'     => $owner_type,
			'owner_key'      => $owner_key,
			'user_id'        => ( 'user' === $owner_type && null !== $owner ) ? (int) $owner_key : 0,
			'agent_slug'     => (string) ( $node['agentSlug'] ?? '' ),
			'title'          => (string) ( $node['title'] ?? '' ),
		);
		if ( $with_messages ) {
			$row['messages'] = is_array( $node['transcript'] ?? null ) ? array_values( $node['transcript'] ) : array();
		}
		return $row + array(
			'metadata'             => $metadata,
			'context'              => $context,
			'mode'                 => $context,
			'provider'             => (string) ( $node['provider'] ?? '' ),
			'model'                => (string) ( $node['model'] ?? '' ),
			'provider_response_id' => self::nullable_string( $node['providerResponseId'] ?? null ),
			'created_at'           => (string) ( $node['createdAt'] ?? '' ),
			'updated_at'           => (string) ( $node['updatedAt'] ?? '' ),
			'last_read_at'         => self::nullable_string( $node['lastReadAt'] ?? null ),
			'expires_at'           => self::nullable_string( $node['expiresAt'] ?? null ),
		);
	}

	/**
	 * Metadata as a JSON object, whatever the PHP array looks like (`array()` and lists too: a
	 * PHP list comes back with the same int keys).
	 *
	 * @param array<mixed> $metadata
	 */
	public static function json_object( array $metadata ): stdClass {
		return (object) $metadata;
	}

	/**
	 * The complete transcript as a JSON list of objects, one per message.
	 *
	 * @param array<mixed> $messages
	 * @return list<object>
	 * @throws Convograph_Failure When a message is neither an array nor an object.
	 */
	public static function json_messages( array $messages ): array {
		$out = array();
		foreach ( array_values( $messages ) as $index => $message ) {
			if ( is_array( $message ) ) {
				$out[] = (object) $message;
			} elseif ( is_object( $message ) ) {
				$out[] = $message;
			} else {
				throw new Convograph_Failure( 'message ' . $index . ' is a ' . get_debug_type( $message ) . ', not an array; nothing was sent' );
			}
		}
		return $out;
	}

	private static function nullable_string( mixed $value ): ?string {
		return is_scalar( $value ) ? (string) $value : null;
	}
}
