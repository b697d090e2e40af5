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

const TRICKLE_BODY = '{"data":{"conversation":{"id":"00000000-0000-4000-8000-00000000000t","title":"trickled","context":"chat","metadata":{"via":"trickle"},"transcript":[]}}}';

/** The whole answer, as it goes on the wire. */
function trickle_answer( bool $chunked ): string {
	$head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n";
	if ( ! $chunked ) {
		return $head . 'Content-Length: ' . strlen( TRICKLE_BODY ) . "\r\n\r\n" . TRICKLE_BODY;
	}
	$body = '';
	foreach ( str_split( TRICKLE_BODY, 40 ) as $chunk ) {
		$body .= dechex( strlen( $chunk ) ) . "\r\n" . $chunk . "\r\n";
	}
	return $head . "Transfer-Encoding: chunked\r\n\r\n" . $body . "0\r\n\r\n";
}

/**
 * Read one request (headers and a Content-Length body); false if the client went away.
 *
 * @param resource $client
 */
function trickle_read_request( $client ): bool {
	$raw = '';
	while ( ! str_contains( $raw, "\r\n\r\n" ) || strlen( $raw ) < trickle_request_length( $raw ) ) {
		$chunk = fread( $client, 65536 );
		if ( false === $chunk || ( '' === $chunk && feof( $client ) ) ) {
			return false;
		}
		$raw .= $chunk;
	}
	return true;
}

function trickle_request_length( string $raw ): int {
	$end = (int) strpos( $raw, "\r\n\r\n" ) + 4;
	return $end + ( 1 === preg_match( '/^content-length:\s*(\d+)/im', substr( $raw, 0, $end ), $m ) ? (int) $m[1] : 0 );
}

[ , $gap, $connections, $mode ] = $argv + array( '', '0.05', '1', '' );
$server                        = stream_socket_server( 'tcp://127.0.0.1:0', $errno, $errstr );
if ( false === $server ) {
	fwrite( STDERR, "trickle_server.php: cannot listen: {$errstr}\n" );
	exit( 1 );
}
$name = (string) stream_socket_get_name( $server, false );
echo substr( $name, strrpos( $name, ':' ) + 1 ), "\n";
fflush( STDOUT );

$answer = trickle_answer( 'chunked' === $mode );
for ( $n = 0; $n < (int) $connections; $n++ ) {
	$client = @stream_socket_accept( $server, 30 ); // phpcs:ignore WordPress.PHP.NoSilencedErrors.Discouraged
	if ( false === $client ) {
		break;
	}
	if ( trickle_read_request( $client ) ) {
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
