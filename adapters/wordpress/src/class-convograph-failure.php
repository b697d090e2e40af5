<?php
/**
 * Why a store call could not do its work. Internal to the adapter: every store method turns
 * it into its interface's failure value and one log line; it never reaches WordPress.
 *
 * @package Convograph
 */

declare( strict_types=1 );

final class Convograph_Failure extends RuntimeException {

	/**
	 * @param string      $message     One line, without credentials.
	 * @param bool        $no_response True when no HTTP response arrived (refused, reset,
	 *                                 timeout): the request may or may not have reached the server.
	 * @param string|null $user_error  The code of the mutation's first user error (CONFLICT,
	 *                                 NOT_FOUND, ...) when that is why.
	 * @param float|null  $refused     Set when the server refused the request before running any
	 *                                 of it (a 429; convograph's DATABASE_UNAVAILABLE before the
	 *                                 operation started): the seconds it asks to wait (its
	 *                                 Retry-After; 0 when it said none). Any request may then be
	 *                                 sent again, a write included: nothing of it was done.
	 */
	public function __construct( string $message, public readonly bool $no_response = false, public readonly ?string $user_error = null, public readonly ?float $refused = null ) {
		parent::__construct( $message );
	}
}
