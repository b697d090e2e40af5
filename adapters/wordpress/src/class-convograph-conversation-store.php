<?php
/**
 * Agents API conversation store backed by convograph.
 *
 * One SERVICE token per site. A method that names an owner (the int-user and `_for_owner`
 * methods) sends it as `Convograph-Owner: TYPE:KEY`, and convograph runs the request exactly
 * as that owner: creates are owned by it, reads see only its sessions. A method that gets only
 * a session id sends no owner: the SERVICE token reaches every session of its workspace by id,
 * as the bundled store does; Agents API checks ownership first through get_session_for_owner().
 *
 * Every method returns its interface's failure value ('' / null / false / array()) and writes
 * one `error_log` line when convograph cannot be asked or refuses; none throws.
 *
 * update_session() is conditional on the version of the session this store object last saw
 * (a read that returned its messages, or its own last save): if anyone has written the
 * session since, it stores nothing and returns false (CONFLICT), instead of dropping their
 * turn. update_title() is sent on that version too, so that its retry is never applied twice
 * and the store knows when the title was the only write since; after another writer's write
 * the title is set anyway. A session this store has not read is written unconditionally, as
 * the bundled store does. The plugin makes one store per PHP request (its `static $instance`),
 * so Agents API's get, modify, update within one request is conditional. (Under a persistent
 * worker the store outlives the request; a remembered version is only ever a precondition, so
 * the worst it does is refuse a save: see README.md.)
 *
 * @package Convograph
 */

declare( strict_types=1 );

use AgentsAPI\Core\Database\Chat\WP_Agent_Conversation_Lock;
use AgentsAPI\Core\Database\Chat\WP_Agent_Principal_Conversation_Session_Reader;
use AgentsAPI\Core\Workspace\WP_Agent_Workspace_Scope;

require_once __DIR__ . '/contracts/conversation-store-interfaces.php';
require_once __DIR__ . '/class-convograph-failure.php';
require_once __DIR__ . '/class-convograph-http.php';
require_once __DIR__ . '/class-convograph-graphql-client.php';
require_once __DIR__ . '/class-convograph-owner.php';
require_once __DIR__ . '/class-convograph-session-rows.php';
require_once __DIR__ . '/class-convograph-operations.php';

final class Convograph_Conversation_Store implements WP_Agent_Principal_Conversation_Session_Reader, WP_Agent_Conversation_Lock {

	public const DEFAULT_TIMEOUT_SECONDS = 10.0;

	private const DEFAULT_LIMIT   = 50;
	private const PAGE_SIZE       = 100; // convograph's largest page by default (a server may cap it lower).
	private const MAX_LOCK_TTL    = 86400; // convograph's longest lock.
	private const MAX_GRAPHQL_INT = 2147483647;
	private const MAX_VERSIONS    = 10000; // Sessions whose version is remembered (the oldest go).

	private Convograph_Graphql_Client $client;

	/** The token's workspace key (`type:id`), asked for once. */
	private ?string $token_workspace = null;

	/**
	 * Session id (lower case) => the version this store last saw it at: read with its messages,
	 * or saved by update_session() on top of such a read. update_session() sends it as
	 * expectedVersion.
	 *
	 * @var array<string,int>
	 */
	private array $versions = array();

	/**
	 * Session id (lower case) => its title at the version in `$versions` (null: none), so that
	 * update_title() can tell its own lost first attempt from another writer's.
	 *
	 * @var array<string,string|null>
	 */
	private array $titles = array();

	/**
	 * @param string        $endpoint      convograph's GraphQL URL, e.g. https://cg.example/graphql.
	 * @param string        $service_token The site's SERVICE token.
	 * @param callable|null $http          A transport (see Convograph_Http); default: WordPress's
	 *                                     HTTP API when loaded, else curl, else PHP streams.
	 */
	public function __construct( string $endpoint, string $service_token, ?callable $http = null ) {
		$this->client = new Convograph_Graphql_Client( $endpoint, $service_token, $http, self::DEFAULT_TIMEOUT_SECONDS );
	}

	/** Seconds each method may take, all its requests and a retry included (default 10). */
	public function set_timeout( float $seconds ): void {
		$this->client->set_timeout( $seconds );
	}

	/* ------------------------- WP_Agent_Conversation_Store ------------------------- */

	public function create_session( WP_Agent_Workspace_Scope $workspace, int $user_id, string $agent_slug = '', array $metadata = array(), string $context = 'chat' ): string {
		return $this->create_session_for_owner( $workspace, Convograph_Owner::user( $user_id ), $agent_slug, $metadata, $context );
	}

	/** @return array<int,array<string,mixed>> */
	public function list_sessions( WP_Agent_Workspace_Scope $workspace, int $user_id, array $args = array() ): array {
		return $this->list_sessions_for_owner( $workspace, Convograph_Owner::user( $user_id ), $args );
	}

	/**
	 * Any session of the token's workspace. The owner key is not stored in clear, so the row's
	 * `owner_key` is '' and `user_id` 0; get_session_for_owner() returns them.
	 *
	 * @return array<string,mixed>|null
	 */
	public function get_session( string $session_id ): ?array {
		return $this->guarded(
			__FUNCTION__,
			null,
			fn (): ?array => $this->read_session( $session_id, null )
		);
	}

	public function update_session( string $session_id, array $messages, array $metadata = array(), string $provider = '', string $model = '', ?string $provider_response_id = null ): bool {
		return $this->guarded(
			__FUNCTION__,
			false,
			function () use ( $session_id, $messages, $metadata, $provider, $model, $provider_response_id ): bool {
				$input = array(
					'conversationId' => $session_id,
					'messages'       => Convograph_Session_Rows::json_messages( $messages ),
					'metadata'       => Convograph_Session_Rows::json_object( $this->keeping_token_id( $session_id, $metadata ) ),
				);
				if ( '' !== $provider ) {
					$input['provider'] = $provider;
				}
				if ( '' !== $model ) {
					$input['model'] = $model;
				}
				if ( null !== $provider_response_id ) {
					$input['providerResponseId'] = $provider_response_id;
				}
				// Only if nobody has written the session since this store read it: a concurrent
				// writer's turn is never overwritten (agents-api #74, #82).
				$expected = $this->versions[ strtolower( $session_id ) ] ?? null;
				if ( null === $expected ) {
					$this->mutate( Convograph_Operations::REPLACE_TRANSCRIPT, 'replaceTranscript', $input, null, true );
					return true; // Not read here: written unconditionally, last write wins.
				}
				$input['expectedVersion'] = $expected;
				try {
					$payload = $this->mutate( Convograph_Operations::REPLACE_TRANSCRIPT, 'replaceTranscript', $input, null, true );
					$this->remember( $session_id, $payload['conversation']['version'] ?? null );
				} catch ( Convograph_Failure $e ) {
					if ( 'CONFLICT' !== $e->user_error ) {
						throw $e;
					}
					$this->own_lost_save( $session_id, $input, $expected, $e );
				}
				return true;
			}
		);
	}

	public function delete_session( string $session_id ): bool {
		if ( '' === trim( $session_id ) ) {
			return true; // Nothing can have that id: already gone.
		}
		return $this->guarded(
			__FUNCTION__,
			false,
			function () use ( $session_id ): bool {
				$this->mutate( Convograph_Operations::DELETE, 'deleteConversation', array( 'id' => $session_id ), null, true );
				unset( $this->versions[ strtolower( $session_id ) ], $this->titles[ strtolower( $session_id ) ] );
				return true; // Deleted now or before: either way it is gone.
			}
		);
	}

	/** @return array<string,mixed>|null */
	public function get_recent_pending_session( WP_Agent_Workspace_Scope $workspace, int $user_id, int $seconds = 600, string $context = 'chat', ?int $token_id = null ): ?array {
		return $this->get_recent_pending_session_for_owner( $workspace, Convograph_Owner::user( $user_id ), $seconds, $context, $token_id );
	}

	public function update_title( string $session_id, string $title ): bool {
		return $this->guarded(
			__FUNCTION__,
			false,
			function () use ( $session_id, $title ): bool {
				$input    = array(
					'id'    => $session_id,
					'title' => $title,
				);
				$expected = $this->versions[ strtolower( $session_id ) ] ?? null;
				if ( null === $expected ) {
					$this->mutate( Convograph_Operations::UPDATE_TITLE, 'updateConversation', $input, null, true );
					return true; // Not read here: no version to follow.
				}
				// A title bumps the version too. Sent on the version this store holds, it moves
				// that version on when it was the only write since, and a retry after a lost
				// answer is never applied twice (which left the store a version behind, so that
				// its next update_session() blamed a concurrent writer that did not exist).
				try {
					$payload = $this->mutate( Convograph_Operations::UPDATE_TITLE, 'updateConversation', $input + array( 'expectedVersion' => $expected ), null, true );
					$this->remember( $session_id, $payload['conversation']['version'] ?? null, $title );
					return true;
				} catch ( Convograph_Failure $e ) {
					if ( 'CONFLICT' !== $e->user_error ) {
						throw $e;
					}
				}
				if ( $this->client->retried() && $this->own_lost_title( $session_id, $title, $expected ) ) {
					return true;
				}
				// Someone else wrote since this store read the session. A title is not a turn:
				// it is set anyway (last write wins, as before), and the version this store holds
				// stays, so that its next update_session() is refused, as it must be.
				$this->mutate( Convograph_Operations::UPDATE_TITLE, 'updateConversation', $input, null, true );
				return true;
			}
		);
	}

	/* -------------------- WP_Agent_Principal_Conversation_Store -------------------- */

	public function create_session_for_owner( WP_Agent_Workspace_Scope $workspace, array $owner, string $agent_slug = '', array $metadata = array(), string $context = 'chat' ): string {
		return $this->guarded(
			__FUNCTION__,
			'',
			function () use ( $workspace, $owner, $agent_slug, $metadata, $context ): string {
				$owner = Convograph_Owner::canonical( $owner );
				$this->check_workspace( $workspace );
				$input = array(
					'agentSlug'      => $agent_slug,
					'metadata'       => Convograph_Session_Rows::json_object( $metadata ),
					'context'        => $context,
					// A retry after a lost answer returns this conversation instead of a second one.
					'idempotencyKey' => self::uuid4(),
				);
				$payload = $this->mutate( Convograph_Operations::CREATE, 'createConversation', $input, Convograph_Owner::header( $owner ), true );
				$id      = $payload['conversation']['id'] ?? null;
				if ( ! is_string( $id ) || '' === $id ) {
					throw new Convograph_Failure( 'createConversation answered no conversation id' );
				}
				return $id;
			}
		);
	}

	/**
	 * Newest first. `limit` (default 50, at least 1, no upper bound), `offset` (rows to skip:
	 * convograph pages by cursor, so the skipped rows are paged through), `agent_slug` and
	 * `context` ('' = no filter), `include_messages` (false: rows have no `messages` key).
	 *
	 * @return array<int,array<string,mixed>>
	 */
	public function list_sessions_for_owner( WP_Agent_Workspace_Scope $workspace, array $owner, array $args = array() ): array {
		return $this->guarded(
			__FUNCTION__,
			array(),
			function () use ( $workspace, $owner, $args ): array {
				$owner = Convograph_Owner::canonical( $owner );
				$this->check_workspace( $workspace );
				$limit  = isset( $args['limit'] ) ? max( 1, self::int_value( $args['limit'] ) ) : self::DEFAULT_LIMIT;
				$offset = isset( $args['offset'] ) ? max( 0, self::int_value( $args['offset'] ) ) : 0;
				$filter = array( 'rootOnly' => true );
				foreach ( array( 'agent_slug' => 'agentSlug', 'context' => 'context' ) as $arg => $field ) {
					if ( isset( $args[ $arg ] ) && is_scalar( $args[ $arg ] ) && '' !== (string) $args[ $arg ] ) {
						$filter[ $field ] = (string) $args[ $arg ];
					}
				}
				return $this->list_page( $filter, $owner, $offset, $limit, ! empty( $args['include_messages'] ) );
			}
		);
	}

	/**
	 * The owner's newest session of `$context` (and `metadata.token_id`, when given) created in
	 * the last `$seconds` (at least 1), if it is still pending (empty transcript or locked).
	 *
	 * @return array<string,mixed>|null
	 */
	public function get_recent_pending_session_for_owner( WP_Agent_Workspace_Scope $workspace, array $owner, int $seconds = 600, string $context = 'chat', ?int $token_id = null ): ?array {
		return $this->guarded(
			__FUNCTION__,
			null,
			function () use ( $workspace, $owner, $seconds, $context, $token_id ): ?array {
				$owner = Convograph_Owner::canonical( $owner );
				$this->check_workspace( $workspace );
				$variables = array(
					// GraphQL's Int ends at 2^31-1 (68 years): a longer window is every session.
					'seconds' => min( self::MAX_GRAPHQL_INT, max( 1, $seconds ) ),
					'context' => $context,
					'tokenId' => null === $token_id ? null : (string) $token_id,
				);
				$data = $this->client->execute( Convograph_Operations::RECENT_PENDING, $variables, Convograph_Owner::header( $owner ), true );
				$node = self::node_or_null( $data, 'recentPendingConversation' );
				return null === $node ? null : $this->row_read( $node, $owner, true );
			}
		);
	}

	/* --------------- WP_Agent_Principal_Conversation_Session_Reader --------------- */

	/**
	 * The session only if `$owner` owns it in `$workspace`; the row carries the owner as given.
	 *
	 * @return array<string,mixed>|null
	 */
	public function get_session_for_owner( WP_Agent_Workspace_Scope $workspace, array $owner, string $session_id ): ?array {
		return $this->guarded(
			__FUNCTION__,
			null,
			function () use ( $workspace, $owner, $session_id ): ?array {
				$owner = Convograph_Owner::canonical( $owner );
				$this->check_workspace( $workspace );
				return $this->read_session( $session_id, $owner );
			}
		);
	}

	/* -------------------------- WP_Agent_Conversation_Lock -------------------------- */

	/**
	 * A lock token, or null while someone else holds an unexpired lock. TTL 1..86400 s.
	 *
	 * The interface has no other failure value: when convograph cannot be asked or refuses, this
	 * is null too, and only the log line (which says so) tells it from contention.
	 */
	public function acquire_session_lock( string $session_id, int $ttl_seconds = 300 ): ?string {
		return $this->guarded(
			__FUNCTION__,
			null,
			function () use ( $session_id, $ttl_seconds ): ?string {
				// The token is this call's own: a retry after a lost answer sends it again and
				// gets the lock the first attempt was granted, not LOCKED by it until its TTL ends.
				$input = array(
					'conversationId' => $session_id,
					'ttlSeconds'     => min( self::MAX_LOCK_TTL, max( 1, $ttl_seconds ) ),
					'token'          => bin2hex( random_bytes( 24 ) ),
				);
				try {
					$data    = $this->client->execute( Convograph_Operations::ACQUIRE_LOCK, array( 'input' => $input ), null, true );
					$payload = is_array( $data['acquireLock'] ?? null ) ? $data['acquireLock'] : array();
					$codes   = array_column( is_array( $payload['userErrors'] ?? null ) ? $payload['userErrors'] : array(), 'code' );
					if ( array( 'LOCKED' ) === $codes ) {
						return null; // Contention is an answer, not a failure.
					}
					self::refuse_user_errors( $payload );
					$token = $payload['token'] ?? null;
					if ( $token !== $input['token'] ) {
						throw new Convograph_Failure( 'acquireLock answered no token, or not the one sent' );
					}
				} catch ( Convograph_Failure $e ) {
					// The caller sees null, as for contention: the log line tells them apart.
					throw new Convograph_Failure(
						$e->getMessage() . ( $e->no_response
							? '; null, not contention: this caller has no lock, but the server may have granted one that nobody holds until its TTL (' . $input['ttlSeconds'] . ' s) ends'
							: '; null, not contention: no lock was taken' ),
						$e->no_response,
						$e->user_error
					);
				}
				return $token;
			}
		);
	}

	/** False when `$lock_token` is not the current holder's (released, expired, re-taken). */
	public function release_session_lock( string $session_id, string $lock_token ): bool {
		return $this->guarded(
			__FUNCTION__,
			false,
			function () use ( $session_id, $lock_token ): bool {
				$input   = array(
					'conversationId' => $session_id,
					'token'          => $lock_token,
				);
				$payload = $this->mutate( Convograph_Operations::RELEASE_LOCK, 'releaseLock', $input, null, false );
				return true === ( $payload['released'] ?? null );
			}
		);
	}

	/* ----------------------------------- Internals ---------------------------------- */

	/**
	 * Run `$body`; on any failure log one line and return `$failure` instead.
	 *
	 * @template T
	 * @param T               $failure
	 * @param callable(): T   $body
	 * @return T
	 */
	private function guarded( string $method, mixed $failure, callable $body ): mixed {
		$this->client->begin_call();
		try {
			return $body();
		} catch ( Throwable $e ) {
			$reason = $e instanceof Convograph_Failure ? $e->getMessage() : get_class( $e ) . ': ' . $e->getMessage();
			// One line, bounded, whatever the server or PHP put in the message.
			$reason = preg_replace( '/[\x00-\x1F\x7F]+/', ' ', $reason ) ?? 'unprintable error';
			error_log( 'convograph: ' . __CLASS__ . '::' . $method . ' failed: ' . substr( $reason, 0, 500 ) ); // phpcs:ignore WordPress.PHP.DevelopmentFunctions.error_log_error_log
			return $failure;
		} finally {
			$this->client->end_call();
		}
	}

	/**
	 * Run a mutation whose payload has `userErrors`; its payload when there are none.
	 *
	 * @param array<string,mixed> $input
	 * @return array<string,mixed>
	 * @throws Convograph_Failure
	 */
	private function mutate( string $document, string $field, array $input, ?string $owner, bool $retry_safe ): array {
		$data    = $this->client->execute( $document, array( 'input' => $input ), $owner, $retry_safe );
		$payload = $data[ $field ] ?? null;
		if ( ! is_array( $payload ) ) {
			throw new Convograph_Failure( $field . ' returned no payload' );
		}
		self::refuse_user_errors( $payload );
		return $payload;
	}

	/**
	 * @param array<string,mixed> $payload
	 * @throws Convograph_Failure
	 */
	private static function refuse_user_errors( array $payload ): void {
		$errors = is_array( $payload['userErrors'] ?? null ) ? $payload['userErrors'] : array();
		if ( array() === $errors ) {
			return;
		}
		$error = is_array( $errors[0] ) ? $errors[0] : array();
		$field = is_array( $error['field'] ?? null ) ? ' (' . implode( '.', $error['field'] ) . ')' : '';
		$code  = (string) ( $error['code'] ?? 'ERROR' );
		throw new Convograph_Failure( $code . $field . ': ' . (string) ( $error['message'] ?? '' ), false, $code );
	}

	/**
	 * The new metadata, with the stored `token_id` when it has none of its own.
	 *
	 * The bundled store keeps the token id of get_recent_pending_session() apart from the
	 * metadata (set once, at creation), so replacing the metadata never ends token-scoped dedup.
	 * convograph matches `metadata.token_id`: it is carried over (one read, only when needed).
	 *
	 * @param array<mixed> $metadata
	 * @return array<mixed>
	 * @throws Convograph_Failure
	 */
	private function keeping_token_id( string $session_id, array $metadata ): array {
		if ( array_key_exists( 'token_id', $metadata ) ) {
			return $metadata;
		}
		$data = $this->client->execute( Convograph_Operations::GET_METADATA, array( 'id' => $session_id ), null, true );
		$node = self::node_or_null( $data, 'conversation' );
		if ( null === $node ) {
			return $metadata; // No such session: the save says NOT_FOUND.
		}
		$stored = $node['metadata'] ?? null;
		if ( ! is_array( $stored ) ) {
			// Replacing the metadata without the token_id it may hold would end its dedup.
			throw new Convograph_Failure( 'the answer has no metadata for the session, whose token_id the save must keep; nothing was saved' );
		}
		if ( array_key_exists( 'token_id', $stored ) ) {
			$metadata['token_id'] = $stored['token_id'];
		}
		return $metadata;
	}

	/**
	 * One session row, read as `$owner` (header) or as the token itself (null).
	 *
	 * @param array{type:string,key:string}|null $owner
	 * @return array<string,mixed>|null
	 */
	private function read_session( string $session_id, ?array $owner ): ?array {
		if ( '' === trim( $session_id ) ) {
			return null;
		}
		$header = null !== $owner ? Convograph_Owner::header( $owner ) : null;
		$data   = $this->client->execute( Convograph_Operations::GET, array( 'id' => $session_id ), $header, true );
		$node   = self::node_or_null( $data, 'conversation' );
		return null === $node ? null : $this->row_read( $node, $owner, true );
	}

	/**
	 * The row of a node just read; with its messages, its version is what update_session()
	 * will expect. A node read for its messages without a transcript list is a failure.
	 *
	 * @param array<string,mixed>                $node
	 * @param array{type:string,key:string}|null $owner
	 * @return array<string,mixed>
	 * @throws Convograph_Failure
	 */
	private function row_read( array $node, ?array $owner, bool $with_messages ): array {
		if ( $with_messages && ! ( is_array( $node['transcript'] ?? null ) && array_is_list( $node['transcript'] ) ) ) {
			// Not an empty transcript: a caller that adds its turn to it and saves would replace
			// every turn, on the version read, with that one.
			throw new Convograph_Failure( 'the answer has a session without its transcript' );
		}
		if ( $with_messages ) {
			$this->remember( (string) ( $node['id'] ?? '' ), $node['version'] ?? null, is_string( $node['title'] ?? null ) ? $node['title'] : null );
		}
		return Convograph_Session_Rows::from_node( $node, $owner, $with_messages );
	}

	/**
	 * The session is at `$version` (with `$title`; false: the title has not changed).
	 */
	private function remember( string $session_id, mixed $version, string|null|false $title = false ): void {
		if ( '' === $session_id || ! is_int( $version ) ) {
			return;
		}
		$key   = strtolower( $session_id );
		$title = false === $title ? ( $this->titles[ $key ] ?? null ) : $title;
		unset( $this->versions[ $key ], $this->titles[ $key ] ); // The newest go last; the oldest are dropped first.
		$this->versions[ $key ] = $version;
		$this->titles[ $key ]   = $title;
		if ( count( $this->versions ) > self::MAX_VERSIONS ) {
			$oldest = array_key_first( $this->versions );
			unset( $this->versions[ $oldest ], $this->titles[ $oldest ] );
		}
	}

	/**
	 * update_title()'s request went out twice (the first answer was lost) and met CONFLICT:
	 * true when the title is stored. It is this call's own first attempt, whose version the
	 * store then follows, if the session is one version on and holds this title where it held
	 * another at the version this store held: only a title update sets a title, and a title
	 * update writes no turn. When the title was already this one, that one version may be
	 * another writer's turn: the version this store holds stays (its next save may then be
	 * refused, never a turn lost). False when the title is not stored (or cannot be read).
	 */
	private function own_lost_title( string $session_id, string $title, int $expected ): bool {
		try {
			$data = $this->client->execute( Convograph_Operations::GET_TITLE, array( 'id' => $session_id ), null, true );
		} catch ( Convograph_Failure $e ) {
			return false;
		}
		$node = is_array( $data['conversation'] ?? null ) ? $data['conversation'] : array();
		if ( ( $node['title'] ?? null ) !== $title ) {
			return false;
		}
		if ( ( $node['version'] ?? null ) === $expected + 1 && ( $this->titles[ strtolower( $session_id ) ] ?? null ) !== $title ) {
			$this->remember( $session_id, $expected + 1, $title );
		}
		return true;
	}

	/**
	 * update_session() got CONFLICT. When its request went out twice (the first answer was
	 * lost), the conflict may be the first attempt's own save: it was, if the session is one
	 * version on and holds everything this save wrote (the transcript, the metadata with the
	 * token_id it kept, and the provider, model and response id it sent). Otherwise a
	 * concurrent writer saved first, and that is the failure.
	 *
	 * @param array<string,mixed> $input The replaceTranscript input, as sent.
	 * @throws Convograph_Failure
	 */
	private function own_lost_save( string $session_id, array $input, int $expected, Convograph_Failure $conflict ): void {
		$why  = 'CONFLICT: a concurrent writer saved session ' . $session_id . ' since this store read it at version '
			. $expected . ' (' . preg_replace( '/^CONFLICT[^:]*: /', '', $conflict->getMessage() ) . ')';
		$next = ' Read it again and apply the turn to what it holds, or hold acquire_session_lock() from the read to the update';
		if ( ! $this->client->retried() ) {
			throw new Convograph_Failure( $why . '; nothing was stored.' . $next, false, 'CONFLICT' );
		}
		try {
			$data   = $this->client->execute( Convograph_Operations::GET_SAVED, array( 'id' => $session_id ), null, true );
			$node   = is_array( $data['conversation'] ?? null ) ? $data['conversation'] : array();
			$landed = ( $node['version'] ?? null ) === $expected + 1 && self::holds( $node, $input );
		} catch ( Throwable $e ) {
			throw new Convograph_Failure( $why . '; the first attempt\'s answer was lost, and whether it was saved could not be read (' . $e->getMessage() . ').' . $next, false, 'CONFLICT' );
		}
		if ( ! $landed ) {
			throw new Convograph_Failure( $why . '; the first attempt\'s answer was lost, and the session holds another save, with or without this one\'s turn.' . $next, false, 'CONFLICT' );
		}
		$this->remember( $session_id, $expected + 1 ); // The conflict was this call's own first attempt.
	}

	/**
	 * Whether the session `$node` (as read) holds every value the replaceTranscript `$input`
	 * wrote. A provider, model or response id that was not sent was not written (the stored
	 * one was kept), so it is not compared. JSON objects compare whatever their key order.
	 *
	 * @param array<string,mixed> $node
	 * @param array<string,mixed> $input
	 * @throws JsonException
	 */
	private static function holds( array $node, array $input ): bool {
		$wrote = array(
			'transcript' => $input['messages'],
			'metadata'   => $input['metadata'],
		);
		foreach ( array( 'provider', 'model', 'providerResponseId' ) as $field ) {
			if ( array_key_exists( $field, $input ) ) {
				$wrote[ $field ] = $input[ $field ];
			}
		}
		foreach ( $wrote as $field => $value ) {
			$sent = json_decode( json_encode( $value, JSON_PRESERVE_ZERO_FRACTION | JSON_THROW_ON_ERROR ), true, 512, JSON_THROW_ON_ERROR );
			if ( ! array_key_exists( $field, $node ) || self::key_sorted( $sent ) !== self::key_sorted( $node[ $field ] ) ) {
				return false;
			}
		}
		return true;
	}

	/** `$value` with the keys of every array in it sorted (as strings), to compare JSON objects. */
	private static function key_sorted( mixed $value ): mixed {
		if ( ! is_array( $value ) ) {
			return $value;
		}
		ksort( $value, SORT_STRING );
		return array_map( self::key_sorted( ... ), $value );
	}

	/**
	 * `$limit` rows after skipping `$offset`, paging through convograph's keyset cursors.
	 *
	 * @param array<string,mixed>           $filter
	 * @param array{type:string,key:string} $owner
	 * @return array<int,array<string,mixed>>
	 */
	private function list_page( array $filter, array $owner, int $offset, int $limit, bool $with_messages ): array {
		$header = Convograph_Owner::header( $owner );
		$after  = null;
		while ( $offset > 0 ) {
			$first     = min( self::PAGE_SIZE, $offset );
			$variables = array(
				'filter' => $filter,
				'first'  => $first,
				'after'  => $after,
			);
			$page      = self::connection( $this->client->execute( Convograph_Operations::SKIP_PAGE, $variables, $header, true ), true );
			$info      = $page['pageInfo'];
			if ( true !== ( $info['hasNextPage'] ?? null ) ) {
				return array(); // The offset is past the last session.
			}
			if ( array() === $page['nodes'] ) {
				throw new Convograph_Failure( 'the answer\'s conversations page is empty and has a next page' );
			}
			$after = $info['endCursor'];
			// What the page held: a server whose CONVOGRAPH_MAX_PAGE_SIZE is below `first`
			// answers fewer rows than asked, and the cursor moved past those only.
			$offset -= count( $page['nodes'] );
		}

		$document = $with_messages ? Convograph_Operations::LIST_WITH_MESSAGES : Convograph_Operations::LIST;
		$rows     = array();
		while ( count( $rows ) < $limit ) {
			$variables = array(
				'filter' => $filter,
				'first'  => min( self::PAGE_SIZE, $limit - count( $rows ) ),
				'after'  => $after,
			);
			$page      = self::connection( $this->client->execute( $document, $variables, $header, true ), true );
			foreach ( $page['nodes'] as $node ) {
				$rows[] = $this->row_read( $node, $owner, $with_messages );
			}
			$info = $page['pageInfo'];
			if ( true !== ( $info['hasNextPage'] ?? null ) ) {
				break;
			}
			$after = $info['endCursor'];
		}
		return $rows;
	}

	/**
	 * `$data[$field]`, a node or null (none). An answer without the field, or with something
	 * else in it, is a failure: never taken for a session that does not exist.
	 *
	 * @param array<string,mixed> $data
	 * @return array<string,mixed>|null
	 * @throws Convograph_Failure
	 */
	private static function node_or_null( array $data, string $field ): ?array {
		$node = $data[ $field ] ?? null;
		if ( ! array_key_exists( $field, $data ) || ( null !== $node && ! is_array( $node ) ) ) {
			throw new Convograph_Failure( 'the answer has no ' . $field . ' (neither an object nor null)' );
		}
		return $node;
	}

	/**
	 * The `conversations` connection of a page: its pageInfo (with an endCursor when there is a
	 * next page) and (with `$nodes`) its nodes, each an object. Anything less is a failure: never
	 * taken for an empty list or a last page.
	 *
	 * @param array<string,mixed> $data
	 * @return array{pageInfo:array<string,mixed>,nodes:list<array<string,mixed>>}
	 * @throws Convograph_Failure
	 */
	private static function connection( array $data, bool $nodes ): array {
		$page = $data['conversations'] ?? null;
		if ( ! is_array( $page ) || ! is_array( $page['pageInfo'] ?? null ) ) {
			throw new Convograph_Failure( 'the answer has no conversations page' );
		}
		if ( true === ( $page['pageInfo']['hasNextPage'] ?? null ) && ! is_string( $page['pageInfo']['endCursor'] ?? null ) ) {
			throw new Convograph_Failure( 'the answer\'s conversations page has a next page and no endCursor' );
		}
		$list = $nodes ? ( $page['nodes'] ?? null ) : array();
		if ( ! is_array( $list ) || ! array_is_list( $list ) || array() !== array_filter( $list, static fn ( mixed $node ): bool => ! is_array( $node ) ) ) {
			throw new Convograph_Failure( 'the answer\'s conversations page has no list of nodes' );
		}
		return array(
			'pageInfo' => $page['pageInfo'],
			'nodes'    => $list,
		);
	}

	/**
	 * convograph takes the workspace from the token, never from the call: a call for another
	 * workspace than the token's is refused rather than silently mixed into the token's one.
	 *
	 * @throws Convograph_Failure
	 */
	private function check_workspace( WP_Agent_Workspace_Scope $workspace ): void {
		if ( null === $this->token_workspace ) {
			$data = $this->client->execute( Convograph_Operations::VIEWER, array(), null, true );
			$key  = $data['viewer']['workspace']['key'] ?? null;
			if ( ! is_string( $key ) ) {
				throw new Convograph_Failure( 'viewer returned no workspace' );
			}
			$this->token_workspace = $key;
		}
		if ( $workspace->key() !== $this->token_workspace ) {
			throw new Convograph_Failure( 'workspace ' . $workspace->key() . ' is not this token\'s workspace ' . $this->token_workspace );
		}
	}

	private static function int_value( mixed $value ): int {
		return is_int( $value ) || is_float( $value ) || is_string( $value ) || is_bool( $value ) ? (int) $value : 0;
	}

	private static function uuid4(): string {
		if ( function_exists( 'wp_generate_uuid4' ) ) {
			return wp_generate_uuid4();
		}
		$bytes    = random_bytes( 16 );
		$bytes[6] = chr( ( ord( $bytes[6] ) & 0x0f ) | 0x40 );
		$bytes[8] = chr( ( ord( $bytes[8] ) & 0x3f ) | 0x80 );
		return vsprintf( '%s%s-%s-%s-%s-%s%s%s', str_split( bin2hex( $bytes ), 4 ) );
	}
}
