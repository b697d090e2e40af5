<?php
/**
 * The HTTP transports the store can post GraphQL requests with.
 *
 * A transport is any callable of this shape (the store's `$http` constructor argument):
 *
 *     function ( string $url, array $headers, string $body, float $timeout_seconds ): array
 *
 * `$headers` maps header names to values. It returns `array( 'status' => int, 'body' =>
 * string, 'headers' => array )`, with `'error' => string` and status 0 when no HTTP response
 * arrived (refused, reset, timed out, DNS). `'headers'` maps the answer's header names, in
 * lower case, to their values (a header given twice: its values joined with ", "); the store
 * reads `retry-after` (how long a 429 or 503 asks it to wait before sending again) and
 * `location` (where a redirect points). A transport may leave it out: the store then retries a
 * refusal after the wait the body names, if any, and says only the status of a redirect. It
 * should not throw; the store treats an exception as status 0.
 *
 * @package Convograph
 */

declare( strict_types=1 );

require_once __DIR__ . '/class-convograph-http-answer.php';

final class Convograph_Http {

	/** The most one read of the streams transport asks for. */
	private const READ_BYTES = 65536;

	/** The answer's headers the store reads (WordPress's transport asks for these alone). */
	private const HEADERS_READ = array( 'retry-after', 'location' );

	/**
	 * WordPress's HTTP API when it is loaded, else the curl extension, else PHP's streams.
	 *
	 * @return callable(string,array<string,string>,string,float):array{status:int,body:string,error?:string,headers?:array<string,string>}
	 */
	public static function default_transport(): callable {
		if ( function_exists( 'wp_remote_post' ) ) {
			return self::wordpress( ... );
		}
		if ( function_exists( 'curl_init' ) ) {
			return self::curl( ... );
		}
		return self::streams( ... );
	}

	/**
	 * POST through `wp_remote_post` (honours the site's proxy and certificate settings).
	 *
	 * @param array<string,string> $headers
	 * @return array{status:int,body:string,error?:string,headers?:array<string,string>}
	 */
	public static function wordpress( string $url, array $headers, string $body, float $timeout_seconds ): array {
		$response = wp_remote_post(
			$url,
			array(
				'headers'     => $headers,
				'body'        => $body,
				'timeout'     => $timeout_seconds,
				'redirection' => 0,
				'data_format' => 'body',
			)
		);
		if ( is_wp_error( $response ) ) {
			return array(
				'status' => 0,
				'body'   => '',
				'error'  => $response->get_error_message(),
			);
		}
		$headers = array();
		foreach ( self::HEADERS_READ as $name ) {
			$value = wp_remote_retrieve_header( $response, $name ); // A string, or an array when repeated.
			if ( array() !== $value && '' !== $value ) {
				$headers[ $name ] = is_array( $value ) ? implode( ', ', $value ) : (string) $value;
			}
		}
		return array(
			'status'  => (int) wp_remote_retrieve_response_code( $response ),
			'body'    => (string) wp_remote_retrieve_body( $response ),
			'headers' => $headers,
		);
	}

	/**
	 * POST with the curl extension; the timeout bounds the whole exchange, but for a host name's
	 * lookup that hangs: curl's threaded resolver gives up on time, then waits for the lookup
	 * to end (curl/curl#2975), as long as the system resolver takes.
	 *
	 * @param array<string,string> $headers
	 * @return array{status:int,body:string,error?:string,headers?:array<string,string>}
	 */
	public static function curl( string $url, array $headers, string $body, float $timeout_seconds ): array {
		$lines = array( 'Expect:' ); // No "100-continue" round trip before large bodies.
		foreach ( $headers as $name => $value ) {
			$lines[] = $name . ': ' . $value;
		}
		$milliseconds = max( 1, (int) ceil( $timeout_seconds * 1000 ) );
		$received     = array();

		$handle = curl_init( $url );
		curl_setopt_array(
			$handle,
			array(
				CURLOPT_POST              => true,
				CURLOPT_POSTFIELDS        => $body,
				CURLOPT_HTTPHEADER        => $lines,
				CURLOPT_RETURNTRANSFER    => true,
				CURLOPT_FOLLOWLOCATION    => false,
				CURLOPT_PROTOCOLS         => CURLPROTO_HTTP | CURLPROTO_HTTPS,
				CURLOPT_TIMEOUT_MS        => $milliseconds,
				CURLOPT_CONNECTTIMEOUT_MS => $milliseconds,
				CURLOPT_NOSIGNAL          => true, // Sub-second timeouts without SIGALRM.
				CURLOPT_HEADERFUNCTION    => static function ( $handle, string $line ) use ( &$received ): int {
					if ( str_starts_with( $line, 'HTTP/' ) ) {
						$received = array(); // A new answer (after an interim 1xx): its own headers.
					} elseif ( false !== strpos( $line, ':' ) ) {
						[ $name, $value ]  = explode( ':', $line, 2 );
						$name              = strtolower( trim( $name ) );
						$value             = trim( $value );
						$received[ $name ] = isset( $received[ $name ] ) ? $received[ $name ] . ', ' . $value : $value;
					}
					return strlen( $line );
				},
			)
		);
		$response = curl_exec( $handle );
		$status   = (int) curl_getinfo( $handle, CURLINFO_RESPONSE_CODE );
		$error    = curl_error( $handle );
		curl_close( $handle );

		if ( ! is_string( $response ) || 0 === $status ) {
			return array(
				'status' => 0,
				'body'   => '',
				'error'  => '' !== $error ? $error : 'no response',
			);
		}
		return array(
			'status'  => $status,
			'body'    => $response,
			'headers' => $received,
		);
	}

	/**
	 * POST over a socket of PHP's own (`tcp://`; `ssl://` for https, which needs openssl): no
	 * extension. The timeout bounds the exchange: the connect (and TLS handshake), every write
	 * and every read get only what is left of it, and the call gives up once it has passed,
	 * however slowly the answer trickles in. (PHP's http:// stream wrapper cannot do this: its
	 * timeout bounds each read, so an answer arriving a byte at a time kept a call waiting for
	 * as many timeouts as it had bytes.)
	 *
	 * But not the host name's lookup: stream_socket_client resolves it with the system
	 * resolver (a blocking getaddrinfo, before its timeout starts), and no PHP code can cut
	 * that short. A DNS server that does not answer holds the call for the resolver's own
	 * timeout (glibc, one nameserver: `options timeout:` seconds times `attempts:`, 5 x 2 by
	 * default). See README.md (Timeouts).
	 *
	 * @param array<string,string> $headers
	 * @return array{status:int,body:string,error?:string,headers?:array<string,string>}
	 */
	public static function streams( string $url, array $headers, string $body, float $timeout_seconds ): array {
		$deadline = microtime( true ) + $timeout_seconds;
		$parts    = parse_url( $url );
		$scheme   = strtolower( (string) ( $parts['scheme'] ?? '' ) );
		$host     = (string) ( $parts['host'] ?? '' );
		if ( ! in_array( $scheme, array( 'http', 'https' ), true ) || '' === $host ) {
			return self::no_response( 'not an http(s) URL' );
		}
		$port   = (int) ( $parts['port'] ?? ( 'https' === $scheme ? 443 : 80 ) );
		$remote = ( 'https' === $scheme ? 'ssl://' : 'tcp://' ) . $host . ':' . $port; // An IPv6 host keeps its brackets.
		$lines  = array(
			'POST ' . ( $parts['path'] ?? '/' ) . ( isset( $parts['query'] ) ? '?' . $parts['query'] : '' ) . ' HTTP/1.1',
			'Host: ' . $host . ( isset( $parts['port'] ) ? ':' . $port : '' ),
			'Connection: close',
			'Content-Length: ' . strlen( $body ),
		);
		foreach ( $headers as $name => $value ) {
			$lines[] = $name . ': ' . $value;
		}
		$context = stream_context_create(
			array(
				'ssl' => array(
					'peer_name'        => trim( $host, '[]' ),
					'verify_peer'      => true,
					'verify_peer_name' => true,
					'SNI_enabled'      => true,
				),
			)
		);

		$errno    = 0;
		$errstr   = '';
		$warnings = array();
		// A failed TLS handshake (an untrusted certificate) says why only in its warnings.
		set_error_handler(
			static function ( int $level, string $message ) use ( &$warnings ): bool {
				$warnings[] = $message;
				return true;
			}
		);
		try {
			// For ssl:// the TLS handshake shares this timeout with the TCP connect.
			$socket = stream_socket_client( $remote, $errno, $errstr, max( 0.001, $deadline - microtime( true ) ), STREAM_CLIENT_CONNECT, $context );
		} finally {
			restore_error_handler();
		}
		if ( false === $socket ) {
			$why = array_values( array_filter( array_merge( array( $errstr ), $warnings ) ) );
			return self::no_response( 'connecting to ' . $remote . ' failed: ' . ( array() !== $why ? implode( '; ', $why ) : 'error ' . $errno ) );
		}
		try {
			$unsent   = self::send( $socket, implode( "\r\n", $lines ) . "\r\n\r\n" . $body, $deadline );
			$response = self::receive( $socket, $deadline, $timeout_seconds );
		} finally {
			fclose( $socket );
		}
		// A server may answer (413) and close before it has read the whole request: its answer
		// counts. Only without one is the failed send the error.
		return ( 0 === $response['status'] && null !== $unsent ) ? self::no_response( $unsent ) : $response;
	}

	/**
	 * Write all of `$data` by `$deadline`; null when it was written, else why not.
	 *
	 * @param resource $socket
	 */
	private static function send( $socket, string $data, float $deadline ): ?string {
		while ( '' !== $data ) {
			if ( ! self::wait_until( $socket, $deadline ) ) {
				return 'timed out sending the request';
			}
			$written = @fwrite( $socket, $data ); // phpcs:ignore WordPress.PHP.NoSilencedErrors.Discouraged
			if ( false === $written || 0 === $written ) {
				return stream_get_meta_data( $socket )['timed_out'] ? 'timed out sending the request' : 'the connection closed while the request was sent';
			}
			$data = substr( $data, $written );
		}
		return null;
	}

	/**
	 * Read the answer until it is complete, the connection closes or `$deadline` passes.
	 *
	 * @param resource $socket
	 * @return array{status:int,body:string,error?:string}
	 */
	private static function receive( $socket, float $deadline, float $timeout_seconds ): array {
		$answer = new Convograph_Http_Answer();
		while ( ! $answer->done() ) {
			if ( ! self::wait_until( $socket, $deadline ) ) {
				return self::no_response( sprintf( 'timed out after %.3F s waiting for the answer (%d bytes of it received)', $timeout_seconds, $answer->received() ) );
			}
			$chunk = @fread( $socket, self::READ_BYTES ); // phpcs:ignore WordPress.PHP.NoSilencedErrors.Discouraged
			if ( is_string( $chunk ) && '' !== $chunk ) {
				$answer->feed( $chunk );
			} elseif ( ! stream_get_meta_data( $socket )['timed_out'] ) {
				// The connection has ended (a read that timed out loops to the deadline check).
				return $answer->result( true );
			}
		}
		return $answer->result();
	}

	/**
	 * Let the socket's next read or write wait only for what is left before `$deadline`;
	 * false when nothing is left.
	 *
	 * @param resource $socket
	 */
	private static function wait_until( $socket, float $deadline ): bool {
		$left = $deadline - microtime( true );
		if ( $left <= 0.0 ) {
			return false;
		}
		$seconds = (int) floor( $left );
		stream_set_timeout( $socket, $seconds, max( 1, (int) ( ( $left - $seconds ) * 1000000 ) ) );
		return true;
	}

	/** @return array{status:int,body:string,error:string} */
	private static function no_response( string $error ): array {
		return array(
			'status' => 0,
			'body'   => '',
			'error'  => $error,
		);
	}
}
