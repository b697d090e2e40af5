<?php
/**
 * One GraphQL-over-HTTP exchange with convograph: the JSON body, the bearer token, the
 * optional `Convograph-Owner` header, and every way the answer can be unusable.
 *
 * @package Convograph
 */

declare( strict_types=1 );

final class Convograph_Graphql_Client {

	public const OWNER_HEADER = 'Convograph-Owner';

	/** A retry is only worth starting with at least this much of the call's time left. */
	private const MIN_RETRY_SECONDS = 0.1;

	private const JSON_FLAGS = JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_PRESERVE_ZERO_FRACTION | JSON_THROW_ON_ERROR;

	/** @var callable(string,array<string,string>,string,float):array{status:int,body:string,error?:string} */
	private $transport;

	/** When the current store call must have returned (microtime), or null outside one. */
	private ?float $deadline = null;

	/** Whether the last execute() sent its request a second time (the first got no answer). */
	private bool $retried = false;

	public function __construct(
		private readonly string $endpoint,
		private readonly string $token,
		?callable $transport,
		private float $timeout_seconds,
	) {
		$this->transport = $transport ?? Convograph_Http::default_transport();
	}

	public function set_timeout( float $seconds ): void {
		$this->timeout_seconds = max( 0.001, $seconds );
	}

	/**
	 * Start one store call: every request until end_call() shares one timeout budget, so a
	 * method returns within the timeout however many requests it makes.
	 */
	public function begin_call(): void {
		$this->deadline = microtime( true ) + $this->timeout_seconds;
	}

	public function end_call(): void {
		$this->deadline = null;
	}

	/**
	 * Run one operation and return its `data`.
	 *
	 * `$owner` (`type:key`) goes in the Convograph-Owner header; null acts as the token itself.
	 * `$retry_safe` allows one more attempt, within the call's time budget, when the first got
	 * no response at all; only for operations that may safely run twice.
	 *
	 * @param array<string,mixed> $variables
	 * @return array<string,mixed>
	 * @throws Convograph_Failure When the server could not be asked or did not answer with data.
	 */
	public function execute( string $document, array $variables, ?string $owner, bool $retry_safe ): array {
		if ( 1 !== preg_match( '#^https?://#i', $this->endpoint ) ) {
			throw new Convograph_Failure( 'the endpoint must be an http(s) URL of convograph\'s /graphql' );
		}
		// Sent as given, a line break ended the header: the server answered a bare HTTP 400, or
		// took what followed for another header of the request.
		if ( 1 === preg_match( '/[\x00-\x1F\x7F]/', $this->token ) ) {
			throw new Convograph_Failure( 'the service token holds a control character (a line break read with it from a file or the environment?); nothing was sent' );
		}
		try {
			$body = json_encode(
				array(
					'query'     => $document,
					'variables' => (object) $variables,
				),
				self::JSON_FLAGS
			);
		} catch ( JsonException $e ) {
			throw new Convograph_Failure( 'the request cannot be encoded as JSON (' . $e->getMessage() . '); nothing was sent' );
		}

		$headers = array(
			'Content-Type'  => 'application/json',
			'Accept'        => 'application/json',
			'Authorization' => 'Bearer ' . $this->token,
			'User-Agent'    => 'convograph-agents-store/1.0',
		);
		if ( null !== $owner ) {
			$headers[ self::OWNER_HEADER ] = $owner;
		}

		$deadline      = $this->deadline ?? microtime( true ) + $this->timeout_seconds;
		$this->retried = false;
		try {
			return $this->attempt( $headers, $body, $deadline );
		} catch ( Convograph_Failure $first ) {
			if ( ! $first->no_response || ! $retry_safe || $deadline - microtime( true ) < self::MIN_RETRY_SECONDS ) {
				throw $first;
			}
			$this->retried = true;
			return $this->attempt( $headers, $body, $deadline );
		}
	}

	/**
	 * True when the last execute() sent its request twice: the first attempt got no answer,
	 * so it may have been carried out as well.
	 */
	public function retried(): bool {
		return $this->retried;
	}

	/**
	 * @param array<string,string> $headers
	 * @return array<string,mixed>
	 * @throws Convograph_Failure
	 */
	private function attempt( array $headers, string $body, float $deadline ): array {
		$left = $deadline - microtime( true );
		if ( $left <= 0.0 ) {
			throw new Convograph_Failure( 'timed out: the call used its ' . $this->timeout_seconds . ' s before this request', true );
		}
		try {
			$response = ( $this->transport )( $this->endpoint, $headers, $body, $left );
		} catch ( Throwable $e ) {
			throw new Convograph_Failure( 'transport error: ' . $e->getMessage(), true );
		}
		$status = (int) ( $response['status'] ?? 0 );
		$text   = (string) ( $response['body'] ?? '' );
		if ( 0 === $status ) {
			throw new Convograph_Failure( 'no response from convograph: ' . (string) ( $response['error'] ?? 'unknown error' ), true );
		}

		try {
			$decoded = json_decode( $text, true, 512, JSON_THROW_ON_ERROR );
		} catch ( JsonException $e ) {
			$decoded = null;
		}
		if ( 200 !== $status ) {
			throw new Convograph_Failure( 'HTTP ' . $status . ( is_array( $decoded ) ? ': ' . self::first_error( $decoded ) : '' ) );
		}
		if ( ! is_array( $decoded ) ) {
			throw new Convograph_Failure( 'the answer is not JSON' );
		}
		if ( ! empty( $decoded['errors'] ) ) {
			throw new Convograph_Failure( 'GraphQL error: ' . self::first_error( $decoded ) );
		}
		if ( ! is_array( $decoded['data'] ?? null ) ) {
			throw new Convograph_Failure( 'the answer has no data' );
		}
		return $decoded['data'];
	}

	/** @param array<mixed> $decoded A GraphQL answer. */
	private static function first_error( array $decoded ): string {
		$error = $decoded['errors'][0] ?? null;
		if ( ! is_array( $error ) ) {
			return 'no error message';
		}
		$code = $error['extensions']['code'] ?? null;
		return (string) ( $error['message'] ?? 'no error message' ) . ( is_string( $code ) ? ' [' . $code . ']' : '' );
	}
}
