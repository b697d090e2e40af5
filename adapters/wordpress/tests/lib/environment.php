<?php
/**
 * What the contract program runs against, read from the environment, and the stores it makes.
 *
 *   CONVOGRAPH_URL            convograph's GraphQL URL (required)
 *   CONVOGRAPH_TOKEN          the site's SERVICE token (required)
 *   CONVOGRAPH_WORKSPACE      the token's workspace, TYPE:ID (default site:1)
 *   CONVOGRAPH_OWNER_TOKENS   pre-SERVICE mode only, "user:1=cvg_…,user:2=cvg_…": each owner's
 *                             own WRITE token. The server does not know SERVICE tokens yet, so a
 *                             transport wrapper here does what the server will do with the
 *                             Convograph-Owner header: it sends the request with that owner's
 *                             token instead (and drops the header). CONVOGRAPH_TOKEN is then the
 *                             WRITE token of user:1, used for the calls that name no owner.
 *   CONVOGRAPH_REVOKED_TOKEN  a revoked token (the revoked-token checks need it)
 *   CONVOGRAPH_WRITE_TOKEN    SERVICE mode: a WRITE token, which must not act for an owner
 *   CONVOGRAPH_MAX_BODY_BYTES the server's body limit (default 32 MiB), to provoke a 413
 *   CONVOGRAPH_RESULT_FILE    where to write what was stored, for the pytest to read back
 *
 * @package Convograph
 */

declare( strict_types=1 );

use AgentsAPI\Core\Workspace\WP_Agent_Workspace_Scope;

require_once dirname( __DIR__, 2 ) . '/src/class-convograph-conversation-store.php';

final class Contract_Environment {

	public const OWNER_HEADER = 'Convograph-Owner';

	/**
	 * @param array<string,string> $owner_tokens Owner (`type:key`) => its WRITE token; empty in SERVICE mode.
	 */
	private function __construct(
		public readonly string $url,
		public readonly string $token,
		public readonly string $workspace,
		public readonly array $owner_tokens,
		public readonly ?string $revoked_token,
		public readonly ?string $write_token,
		public readonly int $max_body_bytes,
		public readonly ?string $result_file,
	) {}

	/** @throws RuntimeException When a required variable is missing. */
	public static function from_env(): self {
		$url   = self::env( 'CONVOGRAPH_URL' );
		$token = self::env( 'CONVOGRAPH_TOKEN' );
		if ( null === $url || null === $token ) {
			throw new RuntimeException( 'set CONVOGRAPH_URL (convograph\'s /graphql URL) and CONVOGRAPH_TOKEN (the SERVICE token)' );
		}
		$owner_tokens = array();
		foreach ( array_filter( explode( ',', self::env( 'CONVOGRAPH_OWNER_TOKENS' ) ?? '' ) ) as $pair ) {
			$at = strrpos( $pair, '=' );
			if ( false === $at ) {
				throw new RuntimeException( 'CONVOGRAPH_OWNER_TOKENS must be "type:key=token,…"' );
			}
			$owner_tokens[ trim( substr( $pair, 0, $at ) ) ] = trim( substr( $pair, $at + 1 ) );
		}
		return new self(
			$url,
			$token,
			self::env( 'CONVOGRAPH_WORKSPACE' ) ?? 'site:1',
			$owner_tokens,
			self::env( 'CONVOGRAPH_REVOKED_TOKEN' ),
			self::env( 'CONVOGRAPH_WRITE_TOKEN' ),
			(int) ( self::env( 'CONVOGRAPH_MAX_BODY_BYTES' ) ?? (string) ( 32 * 1024 * 1024 ) ),
			self::env( 'CONVOGRAPH_RESULT_FILE' ),
		);
	}

	/** True before the server has SERVICE tokens: owners are emulated with their WRITE tokens. */
	public function emulated(): bool {
		return array() !== $this->owner_tokens;
	}

	public function scope(): WP_Agent_Workspace_Scope {
		[ $type, $id ] = explode( ':', $this->workspace, 2 );
		return WP_Agent_Workspace_Scope::from_parts( $type, $id );
	}

	/**
	 * The store as a site would build it; in pre-SERVICE mode its transport emulates the header.
	 *
	 * @param callable|null $http An inner transport (default curl).
	 */
	public function store( ?callable $http = null ): Convograph_Conversation_Store {
		return new Convograph_Conversation_Store( $this->url, $this->token, $this->transport( $http ) );
	}

	/**
	 * The transport a store of this run uses: `$inner` (default curl), behind the header
	 * emulation in pre-SERVICE mode.
	 */
	public function transport( ?callable $inner = null ): callable {
		$inner = $inner ?? Convograph_Http::curl( ... );
		return $this->emulated() ? self::emulating( $inner, $this->owner_tokens ) : $inner;
	}

	/** Every token this run knows, so that the logs can be checked for leaks. */
	public function secrets(): array {
		return array_values( array_filter( array_merge( array( $this->token, $this->revoked_token, $this->write_token ), array_values( $this->owner_tokens ) ) ) );
	}

	/**
	 * What the server will do with Convograph-Owner, done on the client: the owner's own WRITE
	 * token instead of the SERVICE one, and no header (a WRITE token with it is refused).
	 *
	 * @param array<string,string> $owner_tokens
	 */
	public static function emulating( callable $inner, array $owner_tokens ): callable {
		return static function ( string $url, array $headers, string $body, float $timeout ) use ( $inner, $owner_tokens ): array {
			$owner = $headers[ self::OWNER_HEADER ] ?? null;
			unset( $headers[ self::OWNER_HEADER ] );
			if ( null !== $owner ) {
				if ( ! isset( $owner_tokens[ $owner ] ) ) {
					return array(
						'status' => 0,
						'body'   => '',
						'error'  => "emulation: no WRITE token for owner {$owner} in CONVOGRAPH_OWNER_TOKENS",
					);
				}
				$headers['Authorization'] = 'Bearer ' . $owner_tokens[ $owner ];
			}
			return $inner( $url, $headers, $body, $timeout );
		};
	}

	private static function env( string $name ): ?string {
		$value = getenv( $name );
		return false === $value || '' === $value ? null : $value;
	}
}

/**
 * The lines `error_log` writes, captured in a file of their own.
 */
final class Contract_Log {

	private string $file;

	public function __construct() {
		$this->file = (string) tempnam( sys_get_temp_dir(), 'convograph-log-' );
		ini_set( 'log_errors', '1' );
		ini_set( 'error_log', $this->file );
	}

	public function __destruct() {
		@unlink( $this->file ); // phpcs:ignore WordPress.PHP.NoSilencedErrors.Discouraged
	}

	/** @return list<string> */
	public function lines(): array {
		clearstatcache( true, $this->file );
		$text = (string) file_get_contents( $this->file );
		return array_values( array_filter( explode( "\n", $text ), static fn ( string $l ): bool => '' !== $l ) );
	}

	/**
	 * Run `$call`; its result and the log lines it wrote.
	 *
	 * @return array{0:mixed,1:list<string>}
	 */
	public function during( callable $call ): array {
		$before = count( $this->lines() );
		$result = $call();
		return array( $result, array_slice( $this->lines(), $before ) );
	}
}

/**
 * What the run left stored, per owner, for the pytest to read back through GraphQL.
 */
final class Contract_Record {

	/** @var array<string,list<string>> Owner (`type:key`) => ids that must exist at the end. */
	public array $sessions = array();

	/** @var list<string> */
	public array $deleted = array();

	/** @var array<string,array<string,mixed>> Session id => fields as GraphQL must show them. */
	public array $expect = array();

	public function created( string $owner, string $id ): string {
		if ( '' !== $id ) {
			$this->sessions[ $owner ][] = $id;
		}
		return $id;
	}

	public function deleted( string $id ): void {
		foreach ( $this->sessions as $owner => $ids ) {
			$this->sessions[ $owner ] = array_values( array_diff( $ids, array( $id ) ) );
		}
		$this->deleted[] = $id;
	}

	/** @param array<string,mixed> $fields GraphQL Conversation fields, e.g. transcript, title. */
	public function expect( string $id, array $fields ): void {
		$this->expect[ $id ] = $fields + ( $this->expect[ $id ] ?? array() );
	}
}
