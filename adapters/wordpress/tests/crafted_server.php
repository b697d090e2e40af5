<?php
/**
 * A server of crafted HTTP answers, for the contract's checks of the streams transport's
 * reader (its own PHP process: the store under test blocks while it reads).
 *
 *   php crafted_server.php
 *
 * Prints the port it listens on (127.0.0.1), then serves connections one after the other
 * until it is stopped, or 30 s pass without one. The first segment of each request's path
 * names the answer (see crafted_answer()); `big-length` and `big-chunked` take two more, the
 * number of messages and the bytes of each: `/big-chunked/200/100000/graphql`; `redirect` one,
 * the status (`/redirect/307/graphql`), and points to this server's `length-repeated`
 * (`redirect-path`: a 308 pointing there with a path alone). The answer is
 * sent at once, and the connection is then kept open, as a keep-alive server does (the
 * request's `Connection: close` ignored), until the client closes it: the client must know
 * where the answer ends without waiting for the close.
 *
 * @package Convograph
 */

declare( strict_types=1 );

require_once __DIR__ . '/lib/test_server.php';

const CRAFTED_BODY = '{"data":{"conversation":{"id":"00000000-0000-4000-8000-00000000000c","title":"crafted","context":"chat","metadata":{"via":"crafted"},"transcript":[]}}}';

/**
 * The whole answer to `$path`, as it goes on the wire; `$self` is this server's host:port.
 */
function crafted_answer( string $path, string $self ): string {
	$parts = explode( '/', trim( $path, '/' ) );
	$body  = CRAFTED_BODY;
	$n     = strlen( $body );
	return match ( $parts[0] ) {
		// One length, said twice: in one header, and in two.
		'length-repeated' => "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {$n}, {$n}\r\n\r\n{$body}",
		'length-twice'    => "HTTP/1.1 200 OK\r\nContent-Length: {$n}\r\nContent-Type: application/json\r\nContent-Length: {$n}\r\n\r\n{$body}",
		// Lines that end in LF alone, with a length or chunk-encoded.
		'lf-only'         => "HTTP/1.1 200 OK\nContent-Type: application/json\nContent-Length: {$n}\n\n{$body}",
		'lf-only-chunked' => "HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n" . test_server_chunks( $body, 50, "\n" ) . "0\n\n",
		// Answers without a body, and without a length: their end is their headers' end.
		'no-content'      => "HTTP/1.1 204 No Content\r\nDate: Mon, 01 Dec 2025 08:00:00 GMT\r\n\r\n",
		'not-modified'    => "HTTP/1.1 304 Not Modified\r\nContent-Length: {$n}\r\n\r\n", // The length a 200 would have.
		// Interim answers before the answer; a chunked body with extensions and a trailer.
		'interim'         => "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: {$n}\r\n\r\n{$body}",
		'chunk-trailer'   => "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Checksum\r\n\r\n" . test_server_chunks( $body, 40, "\r\n", ';ext=1' ) . "0\r\nX-Checksum: 1\r\n\r\n",
		// A session of (messages x bytes): tens of MB.
		'big-length'      => crafted_big( (int) ( $parts[1] ?? 200 ), (int) ( $parts[2] ?? 100000 ), false ),
		'big-chunked'     => crafted_big( (int) ( $parts[1] ?? 200 ), (int) ( $parts[2] ?? 100000 ), true ),
		// A redirect to an answer of its own: followed, the store would read the crafted session.
		'redirect'        => 'HTTP/1.1 ' . (int) ( $parts[1] ?? 301 ) . " Moved\r\nLocation: http://{$self}/length-repeated/graphql\r\nContent-Type: text/html\r\nContent-Length: 18\r\n\r\n<html>moved</html>",
		// The same, pointing with a path (a relative Location, as RFC 9110 allows).
		'redirect-path'   => "HTTP/1.1 308 Moved\r\nLocation: /length-repeated/graphql\r\nContent-Length: 0\r\n\r\n",
		default           => "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n",
	};
}

/** get_session's answer for a session of `$count` messages of `$bytes` bytes of content. */
function crafted_big( int $count, int $bytes, bool $chunked ): string {
	$messages = array();
	for ( $i = 0; $i < $count; $i++ ) {
		$messages[] = '{"role":"' . ( 0 === $i % 2 ? 'user' : 'assistant' ) . '","content":"' . str_repeat( chr( 97 + $i % 26 ), $bytes ) . '"}';
	}
	$body = '{"data":{"conversation":{"id":"00000000-0000-4000-8000-00000000000b","title":"big","context":"chat","metadata":{},"transcript":[' . implode( ',', $messages ) . ']}}}';
	if ( ! $chunked ) {
		return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " . strlen( $body ) . "\r\n\r\n" . $body;
	}
	return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" . test_server_chunks( $body, 16384, "\r\n" ) . "0\r\n\r\n";
}

$server = test_server_listen( 'crafted_server.php' );
$self   = (string) stream_socket_get_name( $server, false );

while ( true ) {
	$client = @stream_socket_accept( $server, 30 ); // phpcs:ignore WordPress.PHP.NoSilencedErrors.Discouraged
	if ( false === $client ) {
		break;
	}
	$path = test_server_read_request( $client );
	if ( null !== $path ) {
		$answer = crafted_answer( $path, $self );
		for ( $at = 0; $at < strlen( $answer ); $at += $written ) {
			$written = @fwrite( $client, substr( $answer, $at, 1048576 ) ); // phpcs:ignore WordPress.PHP.NoSilencedErrors.Discouraged
			if ( false === $written || 0 === $written ) {
				break; // The client gave up.
			}
		}
		// Kept open until the client closes it (at most 30 s).
		stream_set_timeout( $client, 30 );
		while ( ! feof( $client ) && false !== @fread( $client, 65536 ) ) { // phpcs:ignore WordPress.PHP.NoSilencedErrors.Discouraged
			if ( stream_get_meta_data( $client )['timed_out'] ) {
				break;
			}
		}
	}
	fclose( $client );
}
fclose( $server );
