<?php
/**
 * The HTTP transports the store can post GraphQL requests with.
 *
 * A transport is any callable of this shape (the store's `$http` constructor argument):
 *
 *     function ( string $url, array $headers, string $body, float $timeout_seconds ): array
 *
 * `$headers` maps header names to values. It returns `array( 'status' => int, 'body' =>
 * string )`, with `'error' => string` and status 0 when no HTTP response arrived (refused,
 * reset, timed out, DNS). It should not throw; the store treats an exception as status 0.
 *
 * @package Convograph
 */

declare( strict_types=1 );

final class Convograph_Http {

	/**
	 * WordPress's HTTP API when it is loaded, else the curl extension, else PHP's streams.
	 *
	 * @return callable(string,array<string,string>,string,float):array{status:int,body:string,error?:string}
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
	 * @return array{status:int,body:string,error?:string}
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
		return array(
			'status' => (int) wp_remote_retrieve_response_code( $response ),
			'body'   => (string) wp_remote_retrieve_body( $response ),
		);
	}

	/**
	 * POST with the curl extension; the timeout bounds the whole exchange.
	 *
	 * @param array<string,string> $headers
	 * @return array{status:int,body:string,error?:string}
	 */
	public static function curl( string $url, array $headers, string $body, float $timeout_seconds ): array {
		$lines = array( 'Expect:' ); // No "100-continue" round trip before large bodies.
		foreach ( $headers as $name => $value ) {
			$lines[] = $name . ': ' . $value;
		}
		$milliseconds = max( 1, (int) ceil( $timeout_seconds * 1000 ) );

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
			'status' => $status,
			'body'   => $response,
		);
	}

	/**
	 * POST with PHP's own http:// stream wrapper (no extension needed; https needs openssl).
	 * Its timeout bounds the connect and each read, not the exchange as a whole.
	 *
	 * @param array<string,string> $headers
	 * @return array{status:int,body:string,error?:string}
	 */
	public static function streams( string $url, array $headers, string $body, float $timeout_seconds ): array {
		$lines = array( 'Connection: close' );
		foreach ( $headers as $name => $value ) {
			$lines[] = $name . ': ' . $value;
		}
		$context = stream_context_create(
			array(
				'http' => array(
					'method'           => 'POST',
					'header'           => implode( "\r\n", $lines ),
					'content'          => $body,
					'timeout'          => $timeout_seconds,
					'ignore_errors'    => true, // The body of a 4xx/5xx answer, not false.
					'follow_location'  => 0,
					'protocol_version' => 1.1,
				),
			)
		);

		error_clear_last();
		// The wrapper warns on failure; the warning becomes the returned error instead.
		$response = @file_get_contents( $url, false, $context ); // phpcs:ignore WordPress.PHP.NoSilencedErrors.Discouraged
		$status   = self::status_line( $http_response_header ?? array() );
		if ( false === $response || 0 === $status ) {
			$last = error_get_last();
			return array(
				'status' => 0,
				'body'   => '',
				'error'  => null !== $last ? $last['message'] : 'no response',
			);
		}
		return array(
			'status' => $status,
			'body'   => $response,
		);
	}

	/**
	 * The status code of the last status line (after any `100 Continue`).
	 *
	 * @param array<int,string> $response_headers
	 */
	private static function status_line( array $response_headers ): int {
		$status = 0;
		foreach ( $response_headers as $line ) {
			if ( 1 === preg_match( '#^HTTP/\S+\s+(\d{3})#', $line, $match ) ) {
				$status = (int) $match[1];
			}
		}
		return $status;
	}
}
