<?php
/**
 * The store against a server that limits its token to one request in 4 s (burst 1): a call
 * the server refuses with 429 and `Retry-After: 4` runs nothing, so the store waits that long
 * and sends it again, a chat turn's save included, through the curl and the streams
 * transports; a call whose time cannot hold the wait fails at once, saying what the server
 * asked, and stores nothing. (Before, every such call failed with 'HTTP 429' at once, and
 * the turn was lost unless the host retried it.)
 *
 *     CONVOGRAPH_URL=… CONVOGRAPH_TOKEN=<SERVICE token> CONVOGRAPH_WORKSPACE=site:42 \
 *     CONVOGRAPH_RESULT_FILE=out.json php adapters/wordpress/tests/rate_limited.php
 *
 * CONVOGRAPH_TRANSPORTS names the transports to check, comma-separated (both by default).
 * (tests/test_adapter_wordpress.py starts such a server and runs one program per transport at
 * once, each with a token, and so a bucket, of its own: each transport waits out the server's
 * Retry-After several times. Then it reads back what they stored.) Exit 0 only when every
 * check passed.
 *
 * @package Convograph
 */

declare( strict_types=1 );

require_once __DIR__ . '/lib/checks.php';
require_once __DIR__ . '/lib/environment.php';
require_once __DIR__ . '/lib/fixtures.php';

/**
 * The server's Retry-After, less what a clock's rounding may take off it. Four seconds, not
 * one: each check needs its call to reach the server before the token's next request is
 * allowed, which a loaded machine (a CI run beside other work) may not do within a second.
 */
const RATE_LIMITED_WAIT = 3.9;

/** @return int The exit code. */
function rate_limited_main(): int {
	try {
		$env = Contract_Environment::from_env();
	} catch ( RuntimeException $e ) {
		fwrite( STDERR, 'rate_limited.php: ' . $e->getMessage() . "\n" );
		return 2;
	}
	$transports = explode( ',', (string) ( getenv( 'CONVOGRAPH_TRANSPORTS' ) ?: 'curl,streams' ) );
	$unknown    = array_diff( $transports, array( 'curl', 'streams' ) );
	if ( array() !== $unknown ) {
		fwrite( STDERR, 'rate_limited.php: CONVOGRAPH_TRANSPORTS: unknown transport ' . implode( ', ', $unknown ) . " (curl, streams)\n" );
		return 2;
	}
	$c      = new Contract_Checks();
	$log    = new Contract_Log();
	$ws     = $env->scope();
	$tag    = 'rl' . bin2hex( random_bytes( 4 ) );
	$stored = array();

	// The call, its result, its log lines and how long it took.
	$timed = static function ( callable $call ) use ( $log ): array {
		$started          = microtime( true );
		[ $result, $lines ] = $log->during( $call );
		return array( $result, $lines, microtime( true ) - $started );
	};

	foreach ( $transports as $transport ) {
		$c->section( "rate limited ({$transport})" );
		$store = new Convograph_Conversation_Store( $env->url, $env->token, Convograph_Http::$transport( ... ) );
		usleep( 4100000 ); // A full bucket: the workspace's read goes through, the create is refused.

		[ $sid, $lines, $took ] = $timed( fn () => $store->create_session( $ws, 1, "{$tag}-{$transport}", array( 'via' => $transport ) ) );
		$c->check( is_string( $sid ) && '' !== $sid, "{$transport}: create_session refused with 429 returns the session it then created" );
		$c->same( array(), $lines, "{$transport}: create_session: nothing logged" );
		$c->check( $took >= RATE_LIMITED_WAIT, sprintf( '%s: create_session waited the Retry-After (took %.3f s)', $transport, $took ) );
		$sid = (string) $sid;

		// A chat turn's save, unconditional (the store has not read the session) and the next
		// call at once: refused, it waits and is saved, once.
		$turns                      = contract_turns( "{$tag} {$transport}", 2 );
		[ $saved, $lines, $took ] = $timed( fn () => $store->update_session( $sid, $turns, array( 'via' => $transport ) ) );
		$c->same( true, $saved, "{$transport}: update_session refused with 429 saves the turn once it waited" );
		$c->same( array(), $lines, "{$transport}: update_session: nothing logged" );
		$c->check( $took >= RATE_LIMITED_WAIT, sprintf( '%s: update_session waited the Retry-After (took %.3f s)', $transport, $took ) );

		[ $row, $lines ] = $timed( fn () => $store->get_session( $sid ) );
		$c->same( $turns, $row['messages'] ?? null, "{$transport}: the session holds the turns (read after its own 429)" );
		$c->same( array(), $lines, "{$transport}: get_session: nothing logged" );

		// A call whose time cannot hold the wait is not sent again: it fails at once, and says
		// what the server asked.
		$store->set_timeout( 0.5 );
		$more                     = array_merge( $turns, contract_turns( "{$tag} {$transport} too soon", 1 ) );
		[ $saved, $lines, $took ] = $timed( fn () => $store->update_session( $sid, $more, array( 'via' => $transport ) ) );
		$c->same( false, $saved, "{$transport}: a 429 whose Retry-After outlasts the call's 0.5 s: false" );
		$c->check(
			1 === count( $lines ) && str_contains( $lines[0], 'HTTP 429' ) && str_contains( $lines[0], 'RATE_LIMITED' ) && str_contains( $lines[0], 'not retried: the server asks to wait 4 s' ),
			"{$transport}: one log line with the 429 and the wait the server asked",
			'logged: ' . Contract_Checks::show( $lines )
		);
		$c->check( $took < 0.5, sprintf( '%s: it failed at once, without waiting (took %.3f s)', $transport, $took ) );

		$store->set_timeout( Convograph_Conversation_Store::DEFAULT_TIMEOUT_SECONDS );
		[ $row ] = $timed( fn () => $store->get_session( $sid ) );
		$c->same( $turns, $row['messages'] ?? null, "{$transport}: the refused save stored nothing" );
		$stored[ $sid ] = $turns;
	}

	$c->section( 'logs' );
	$leaks = array_filter( $log->lines(), static fn ( string $line ): bool => str_contains( $line, $env->token ) );
	$c->same( array(), array_values( $leaks ), 'no log line holds the token' );

	if ( null !== $env->result_file ) {
		file_put_contents(
			$env->result_file,
			json_encode(
				array(
					'tag'    => $tag,
					'stored' => array_map( 'contract_wire_messages', $stored ),
					'passed' => $c->count_passed(),
					'failed' => $c->failures(),
				),
				JSON_UNESCAPED_SLASHES | JSON_PRETTY_PRINT | JSON_THROW_ON_ERROR
			)
		);
	}
	$failures = $c->failures();
	fwrite( STDOUT, sprintf( "\n%d checks passed, %d failed\n", $c->count_passed(), count( $failures ) ) );
	if ( array() !== $failures ) {
		fwrite( STDERR, "rate_limited.php: FAILED checks:\n  " . implode( "\n  ", $failures ) . "\n" );
		return 1;
	}
	return 0;
}

exit( rate_limited_main() );
