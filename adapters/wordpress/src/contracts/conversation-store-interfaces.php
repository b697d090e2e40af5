<?php
/**
 * Stand-ins for Agents API's conversation store contracts, written from their documented
 * signatures (convograph's shared/SEEDS.md). Each is declared only when Agents API's own is
 * not loaded, so that the adapter's tests run outside WordPress. The parameter and return
 * types are exactly Agents API's: a store written against these also satisfies the real ones.
 *
 * @package Convograph
 */

declare( strict_types=1 );

namespace AgentsAPI\Core\Database\Chat;

use AgentsAPI\Core\Workspace\WP_Agent_Workspace_Scope;

require_once __DIR__ . '/class-wp-agent-workspace-scope.php';

if ( ! interface_exists( WP_Agent_Conversation_Store::class ) ) {

	/** Transcript persistence for user-owned sessions (int WordPress user ids). */
	interface WP_Agent_Conversation_Store {

		/** @param array<mixed> $metadata Returns a UUIDv4, or '' on failure. */
		public function create_session( WP_Agent_Workspace_Scope $workspace, int $user_id, string $agent_slug = '', array $metadata = array(), string $context = 'chat' ): string;

		/**
		 * Newest first; `limit` (default 50), `offset`, `agent_slug`, `context`, `include_messages`.
		 *
		 * @param array<mixed> $args
		 * @return array<int,array<string,mixed>>
		 */
		public function list_sessions( WP_Agent_Workspace_Scope $workspace, int $user_id, array $args = array() ): array;

		/** @return array<string,mixed>|null */
		public function get_session( string $session_id ): ?array;

		/**
		 * `$messages` is the complete transcript; metadata is replaced; provider and model are
		 * kept when '', the response id when null.
		 *
		 * @param array<mixed> $messages
		 * @param array<mixed> $metadata
		 */
		public function update_session( string $session_id, array $messages, array $metadata = array(), string $provider = '', string $model = '', ?string $provider_response_id = null ): bool;

		/** Idempotent: true for an id that does not exist. */
		public function delete_session( string $session_id ): bool;

		/** @return array<string,mixed>|null */
		public function get_recent_pending_session( WP_Agent_Workspace_Scope $workspace, int $user_id, int $seconds = 600, string $context = 'chat', ?int $token_id = null ): ?array;

		public function update_title( string $session_id, string $title ): bool;
	}
}

if ( ! interface_exists( WP_Agent_Principal_Conversation_Store::class ) ) {

	/** Sessions owned by any principal: `$owner` is `array( 'type' => ..., 'key' => ... )`. */
	interface WP_Agent_Principal_Conversation_Store extends WP_Agent_Conversation_Store {

		/**
		 * @param array{type:string,key:string} $owner
		 * @param array<mixed>                  $metadata
		 */
		public function create_session_for_owner( WP_Agent_Workspace_Scope $workspace, array $owner, string $agent_slug = '', array $metadata = array(), string $context = 'chat' ): string;

		/**
		 * @param array{type:string,key:string} $owner
		 * @param array<mixed>                  $args
		 * @return array<int,array<string,mixed>>
		 */
		public function list_sessions_for_owner( WP_Agent_Workspace_Scope $workspace, array $owner, array $args = array() ): array;

		/**
		 * @param array{type:string,key:string} $owner
		 * @return array<string,mixed>|null
		 */
		public function get_recent_pending_session_for_owner( WP_Agent_Workspace_Scope $workspace, array $owner, int $seconds = 600, string $context = 'chat', ?int $token_id = null ): ?array;
	}
}

if ( ! interface_exists( WP_Agent_Principal_Conversation_Session_Reader::class ) ) {

	/** For stores that keep owner keys protected at rest: read one session as its owner. */
	interface WP_Agent_Principal_Conversation_Session_Reader extends WP_Agent_Principal_Conversation_Store {

		/**
		 * @param array{type:string,key:string} $owner
		 * @return array<string,mixed>|null
		 */
		public function get_session_for_owner( WP_Agent_Workspace_Scope $workspace, array $owner, string $session_id ): ?array;
	}
}

if ( ! interface_exists( WP_Agent_Conversation_Lock::class ) ) {

	/** Advisory single-writer locks on a session. */
	interface WP_Agent_Conversation_Lock {

		/** A lock token, or null under contention; an expired lock may be taken over. */
		public function acquire_session_lock( string $session_id, int $ttl_seconds = 300 ): ?string;

		/** False for a stale token: never releases a lock someone else has taken since. */
		public function release_session_lock( string $session_id, string $lock_token ): bool;
	}
}
