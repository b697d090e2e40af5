<?php
/**
 * An Agents API principal owner, `array( 'type' => ..., 'key' => ... )`, as convograph names it
 * in the `Convograph-Owner: TYPE:KEY` header.
 *
 * @package Convograph
 */

declare( strict_types=1 );

final class Convograph_Owner {

	/** The owner types convograph knows (`OwnerType`), as Agents API spells them. */
	public const TYPES = array( 'user', 'audience', 'runtime', 'token', 'system' );

	/**
	 * The owner in canonical shape: a known type, lower-cased and trimmed; a non-empty key that
	 * can travel in an HTTP header unchanged (UTF-8 text without control characters, no spaces
	 * around it, which HTTP would strip; convograph reads the header's bytes as UTF-8). An int
	 * key is accepted as its decimal string.
	 *
	 * @param array<mixed> $owner
	 * @return array{type:string,key:string}
	 * @throws Convograph_Failure When the owner cannot be named in the header.
	 */
	public static function canonical( array $owner ): array {
		$type = $owner['type'] ?? null;
		$type = is_string( $type ) ? strtolower( trim( $type ) ) : '';
		if ( ! in_array( $type, self::TYPES, true ) ) {
			throw new Convograph_Failure( 'owner type must be one of ' . implode( ', ', self::TYPES ) );
		}
		$key = $owner['key'] ?? null;
		$key = is_int( $key ) ? (string) $key : $key;
		// With /u, a key that is not UTF-8 matches nothing (preg_match returns false). Refused
		// as convograph refuses them: control characters (C0, DEL, C1), a space at either end.
		// Any other character is a key's (a no-break space, an emoji's zero-width joiner).
		if ( ! is_string( $key ) || 1 !== preg_match( '/^[^\x00-\x20\x7F-\x{9F}](?:[^\x00-\x1F\x7F-\x{9F}]*[^\x00-\x20\x7F-\x{9F}])?$/u', $key ) ) {
			throw new Convograph_Failure( 'owner key must be non-empty UTF-8 text without control characters or surrounding spaces (it travels in the ' . Convograph_Graphql_Client::OWNER_HEADER . ' header)' );
		}
		return array(
			'type' => $type,
			'key'  => $key,
		);
	}

	/**
	 * The header value, `type:key`.
	 *
	 * @param array{type:string,key:string} $owner A canonical owner.
	 */
	public static function header( array $owner ): string {
		return $owner['type'] . ':' . $owner['key'];
	}

	/**
	 * The owner of the int-user methods: `user:<id>`, as the bundled store keys them.
	 *
	 * @return array{type:string,key:string}
	 */
	public static function user( int $user_id ): array {
		return array(
			'type' => 'user',
			'key'  => (string) $user_id,
		);
	}
}
