<?php
/**
 * What the contract's own HTTP servers (crafted_server.php, trickle_server.php) share: a
 * listening socket whose port goes to stdout, a request read whole, a body chunk-encoded.
 *
 * @package Convograph
 */

declare( strict_types=1 );

/**
 * Listen on an ephemeral port of 127.0.0.1 and print the port (the test reads it); exit 1,
 * naming `$script`, if it cannot.
 *
 * @return resource
 */
function test_server_listen( string $script ) {
	$server = stream_socket_server( 'tcp://127.0.0.1:0', $errno, $errstr );
	if ( false === $server ) {
		fwrite( STDERR, "{$script}: cannot listen: {$errstr}\n" );
		exit( 1 );
	}
	$name = (string) stream_socket_get_name( $server, false );
	echo substr( $name, strrpos( $name, ':' ) + 1 ), "\n";
	fflush( STDOUT );
	return $server;
}

/**
 * Read one request (headers and a Content-Length body); its path, or null if the client went
 * away.
 *
 * @param resource $client
 */
function test_server_read_request( $client ): ?string {
	$raw = '';
	while ( ! str_contains( $raw, "\r\n\r\n" ) || strlen( $raw ) < test_server_request_length( $raw ) ) {
		$chunk = fread( $client, 65536 );
		if ( false === $chunk || ( '' === $chunk && feof( $client ) ) ) {
			return null;
		}
		$raw .= $chunk;
	}
	return explode( ' ', $raw, 3 )[1] ?? '/';
}

function test_server_request_length( string $raw ): int {
	$end = (int) strpos( $raw, "\r\n\r\n" ) + 4;
	return $end + ( 1 === preg_match( '/^content-length:\s*(\d+)/im', substr( $raw, 0, $end ), $m ) ? (int) $m[1] : 0 );
}

/** `$body` chunk-encoded, `$size` bytes a chunk, without the last (empty) chunk. */
function test_server_chunks( string $body, int $size, string $eol = "\r\n", string $extension = '' ): string {
	$out = '';
	foreach ( str_split( $body, $size ) as $chunk ) {
		$out .= dechex( strlen( $chunk ) ) . $extension . $eol . $chunk . $eol;
	}
	return $out;
}
