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

	/**
	 * How many times a request the server refused before running it (a 429, convograph's
	 * DATABASE_UNAVAILABLE before the operation started) is sent again, within the call's time.
	 */
	private const MAX_REFUSED_RETRIES = 2;

	/** The longest Retry-After a call waits for: a longer one fails it at once, saying so. */
	private const MAX_RETRY_AFTER_SECONDS = 5.0;

	/** The first wait after a refusal, doubled for the next, with jitter, after any Retry-After. */
	private const REFUSED_BACKOFF_SECONDS = 0.1;

	private const JSON_FLAGS = JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_PRESERVE_ZERO_FRACTION | JSON_THROW_ON_ERROR;

	/** @var callable(string,array<string,string>,string,float):array{status:int,body:string,error?:string,headers?:array<string,string>} */
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
	 * Whatever `$retry_safe` says, a request the server refused before running any of it is
	 * sent again, up to MAX_REFUSED_RETRIES times: a 429 (a rate limit runs nothing of what it
	 * refuses), convograph's DATABASE_UNAVAILABLE with no `data` and no error `path` (its check
	 * of the token, or the operation's start, found the database away: a restart). It waits
	 * what the server asks (Retry-After, else the error's retryAfterSeconds) plus a backoff,
	 * when that is at most MAX_RETRY_AFTER_SECONDS and leaves time for the attempt; else the
	 * call fails at once, saying what the server asked. Any other answer is not repeated.
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
		$refusals      = 0;
		while ( true ) {
			try {
				return $this->attempt( $headers, $body, $deadline );
			} catch ( Convograph_Failure $failure ) {
				if ( null !== $failure->refused ) {
					++$refusals;
					$this->wait_after_refusal( $failure, $refusals, $deadline );
					continue;
				}
				if ( ! $failure->no_response || ! $retry_safe || $this->retried || $deadline - microtime( true ) < self::MIN_RETRY_SECONDS ) {
					throw $failure;
				}
				$this->retried = true;
			}
		}
	}

	/**
	 * Sleep before sending again the request `$refusal` refused (the `$refusals`-th refusal of
	 * this request); throw it, saying why, when it is not to be sent again.
	 *
	 * @throws Convograph_Failure
	 */
	private function wait_after_refusal( Convograph_Failure $refusal, int $refusals, float $deadline ): void {
		$asked = (float) $refusal->refused;
		$why   = null;
		if ( $refusals > self::MAX_REFUSED_RETRIES ) {
			$why = ' (refused ' . $refusals . ' times)';
		} elseif ( $asked > self::MAX_RETRY_AFTER_SECONDS ) {
			$why = sprintf( '; not retried: the server asks to wait %s s, more than the %s s a call waits', self::seconds( $asked ), self::seconds( self::MAX_RETRY_AFTER_SECONDS ) );
		} else {
			$backoff = self::REFUSED_BACKOFF_SECONDS * ( 2 ** ( $refusals - 1 ) ) * ( 0.5 + mt_rand() / mt_getrandmax() / 2 );
			$wait    = $asked + $backoff;
			$left    = $deadline - microtime( true );
			if ( $left - $wait < self::MIN_RETRY_SECONDS ) {
				// The time left, not the configured timeout: earlier attempts used the rest.
				$why = sprintf( '; not retried: the server asks to wait %s s, past the %s s left of this call\'s %s s', self::seconds( $asked ), self::seconds( max( 0.0, $left ) ), self::seconds( $this->timeout_seconds ) );
			} else {
				usleep( (int) ( $wait * 1000000 ) );
				return;
			}
		}
		// After an attempt that got no answer (retried()), that one may have run.
		throw new Convograph_Failure( $refusal->getMessage() . $why . ( $this->retried ? '' : '; nothing of it was run' ) );
	}

	/**
	 * `$location` (a redirect's Location) as a URL: a relative one, which RFC 9110 allows
	 * (`/v2/graphql`), resolved against `$base`, the URL asked, as libcurl and Go's net/http
	 * resolve it (dot segments are left as they are), without the credentials the URL may hold.
	 */
	private static function resolved( string $location, string $base ): string {
		if ( 1 === preg_match( '#^[a-z][a-z0-9+.-]*:#i', $location ) || 1 !== preg_match( '#^([a-z][a-z0-9+.-]*:)(//[^/?\#]*)?([^?\#]*)(\?[^\#]*)?#i', $base, $parts ) ) {
			return $location;
		}
		[ , $scheme, $authority, $path ] = array_pad( $parts, 4, '' );
		$authority                       = (string) preg_replace( '#^//[^@/]*@#', '//', $authority ); // No credentials in a log line.
		if ( str_starts_with( $location, '//' ) ) {
			return $scheme . $location;
		}
		if ( str_starts_with( $location, '/' ) ) {
			return $scheme . $authority . $location;
		}
		if ( '' === $location || '?' === $location[0] || '#' === $location[0] ) {
			return $scheme . $authority . $path . ( '?' === ( $location[0] ?? '' ) ? '' : ( $parts[4] ?? '' ) ) . $location;
		}
		$directory = false === strrpos( $path, '/' ) ? '/' : substr( $path, 0, strrpos( $path, '/' ) + 1 );
		return $scheme . $authority . $directory . $location;
	}

	/** `$text` for a log line: no control character, at most 500 bytes. */
	private static function one_line( string $text ): string {
		$text = (string) preg_replace( '/[\x00-\x1F\x7F]/', '', $text );
		return strlen( $text ) > 500 ? substr( $text, 0, 500 ) . '…' : $text;
	}

	private static function seconds( float $seconds ): string {
		return rtrim( rtrim( sprintf( '%.3F', $seconds ), '0' ), '.' );
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
		$headers = is_array( $response['headers'] ?? null ) ? array_change_key_case( $response['headers'], CASE_LOWER ) : array();

		try {
			$decoded = json_decode( $text, true, 512, JSON_THROW_ON_ERROR );
		} catch ( JsonException $e ) {
			$decoded = null;
		}
		if ( 200 !== $status ) {
			$why      = 'HTTP ' . $status . ( is_array( $decoded ) ? ': ' . self::first_error( $decoded ) : '' );
			$location = trim( (string) ( $headers['location'] ?? '' ) );
			if ( $status >= 300 && $status < 400 && '' !== $location ) {
				// No transport follows it (a POST redirected would come back a GET without its
				// body, and to another host without the token): say where it points instead.
				$why = 'HTTP ' . $status . ': redirected to ' . self::one_line( self::resolved( $location, $this->endpoint ) ) . ' (not followed: give the store that URL as its endpoint)';
			}
			// A rate limit runs nothing of what it refuses; convograph's 503 before execution
			// neither (a 503 of anything else, a gateway's, may follow a request that ran).
			$refused = 429 === $status || ( 503 === $status && is_array( $decoded ) && self::stopped_before_execution( $decoded ) );
			throw new Convograph_Failure( $why, false, null, $refused ? self::retry_after( $headers, $decoded ) : null );
		}
		if ( ! is_array( $decoded ) ) {
			throw new Convograph_Failure( 'the answer is not JSON' );
		}
		if ( ! empty( $decoded['errors'] ) ) {
			// Under application/json an operation the database's absence stopped before it
			// started is a 200 (`data` null, no error `path`).
			$refused = self::stopped_before_execution( $decoded ) ? self::retry_after( $headers, $decoded ) : null;
			throw new Convograph_Failure( 'GraphQL error: ' . self::first_error( $decoded ), false, null, $refused );
		}
		if ( ! is_array( $decoded['data'] ?? null ) ) {
			throw new Convograph_Failure( 'the answer has no data' );
		}
		return $decoded['data'];
	}

	/**
	 * Whether a GraphQL answer is convograph's for an operation stopped before it ran: every
	 * error DATABASE_UNAVAILABLE, none with a `path` (a field's failure, after a write may have
	 * been done), and no `data` but null.
	 *
	 * @param array<mixed> $decoded
	 */
	private static function stopped_before_execution( array $decoded ): bool {
		$errors = $decoded['errors'] ?? null;
		if ( ! is_array( $errors ) || array() === $errors || null !== ( $decoded['data'] ?? null ) ) {
			return false;
		}
		foreach ( $errors as $error ) {
			if ( ! is_array( $error ) || array_key_exists( 'path', $error ) || 'DATABASE_UNAVAILABLE' !== ( $error['extensions']['code'] ?? null ) ) {
				return false;
			}
		}
		return true;
	}

	/**
	 * The seconds a refusal asks to wait: its Retry-After header (seconds, or an HTTP date),
	 * else, when it has none it can read, its first error's retryAfterSeconds; 0 when it says
	 * none.
	 *
	 * @param array<string,mixed> $headers Lower-case names.
	 * @param mixed               $decoded
	 */
	private static function retry_after( array $headers, mixed $decoded ): float {
		$header = trim( (string) ( $headers['retry-after'] ?? '' ) );
		// delay-seconds of any length: a huge one is a wait past the cap, not none.
		if ( 1 === preg_match( '/^\d+$/', $header ) ) {
			return (float) $header;
		}
		$at = self::http_date( $header );
		if ( null !== $at ) {
			return max( 0.0, $at - microtime( true ) );
		}
		// strtotime() is not used: it read '-1' as a time zone (an hour's wait) and a
		// 10-digit delay as no date (no wait at all).
		$seconds = is_array( $decoded ) ? ( $decoded['errors'][0]['extensions']['retryAfterSeconds'] ?? null ) : null;
		return is_int( $seconds ) || is_float( $seconds ) ? max( 0.0, (float) $seconds ) : 0.0;
	}

	/** The time an HTTP date names (IMF-fixdate, RFC 850 or asctime), or null for none. */
	private static function http_date( string $text ): ?int {
		$text = (string) preg_replace( '/\s+/', ' ', $text );
		foreach ( array( '!D, d M Y H:i:s \G\M\T', '!l, d-M-y H:i:s \G\M\T', '!D M j H:i:s Y' ) as $format ) {
			$at = DateTimeImmutable::createFromFormat( $format, $text, new DateTimeZone( 'UTC' ) );
			if ( false !== $at ) {
				return $at->getTimestamp();
			}
		}
		return null;
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
