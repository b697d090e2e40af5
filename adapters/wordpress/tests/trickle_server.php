<?php
/**
 * A server that answers slowly, one byte at a time, for the contract's timeout checks (its own
 * PHP process: the store under test blocks while it reads).
 *
 *   php trickle_server.php GAP_SECONDS CONNECTIONS [chunked]
 *
 * Prints the port it listens on (127.0.0.1), then serves CONNECTIONS connections, one after
 * the other: it reads the request, then sends a complete GraphQL answer (a conversation titled
 * "trickled"), headers included, one byte every GAP_SECONDS, with a Content-Length, or
 * chunk-encoded with `chunked`. A client that gives up ends its connection; the server exits
 * after the last one, or after 30 s without a connection.
 *
 * @package Convograph
 */

declare( strict_types=1 );

require_once __DIR__ . '/lib/test_server.php';

const TRICKLE_BODY = '{"data":{"conversation":{"id":"00000000-0000-4000-8000-00000000000t","title":"trickled","context":"chat","metadata":{"via":"trickle"},"transcript":[]}}}';

/** The whole answer, as it goes on the wire. */
function trickle_answer( bool $chunked ): string {
	$head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n";
	if ( ! $chunked ) {
		return $head . 'Content-Length: ' . strlen( TRICKLE_BODY ) . "\r\n\r\n" . TRICKLE_BODY;
	}
	return $head . "Transfer-Encoding: chunked\r\n\r\n" . test_server_chunks( TRICKLE_BODY, 40 ) . "0\r\n\r\n";
}

[ , $gap, $connections, $mode ] = $argv + array( '', '0.05', '1', '' );
$server                        = test_server_listen( 'trickle_server.php' );

$answer = trickle_answer( 'chunked' === $mode );
for ( $n = 0; $n < (int) $connections; $n++ ) {
	$client = @stream_socket_accept( $server, 30 ); // phpcs:ignore WordPress.PHP.NoSilencedErrors.Discouraged
	if ( false === $client ) {
		break;
	}
	if ( null !== test_server_read_request( $client ) ) {
		foreach ( str_split( $answer ) as $byte ) {
			if ( false === @fwrite( $client, $byte ) ) { // phpcs:ignore WordPress.PHP.NoSilencedErrors.Discouraged
				break; // The client gave up.
			}
			usleep( (int) ( (float) $gap * 1000000 ) );
		}
	}
	fclose( $client );
}
fclose( $server );
