<?php
/**
 * Answers that are JSON with `data`, but without the field the store asked for (a proxy or a
 * gateway that mangles them, another server at the endpoint): each is a failure with its log
 * line, never taken for a session that does not exist, an empty list or an id of ''. The
 * requests go to the real server, but for one operation, which gets the answer given instead.
 *
 * @package Convograph
 */

declare( strict_types=1 );

function contract_section_malformed( Contract_Run $t ): void {
	$c       = $t->c;
	$ws      = $t->ws;
	$s       = $t->store;
	$forward = $t->env->transport();
	// A store whose requests of `$operation` are answered `$answer` (a JSON body, HTTP 200).
	$mangled = static function ( string $operation, string $answer ) use ( $t, $forward ): Convograph_Conversation_Store {
		return new Convograph_Conversation_Store(
			$t->env->url,
			$t->env->token,
			static function ( string $url, array $headers, string $body, float $timeout ) use ( $operation, $answer, $forward ): array {
				if ( ! str_contains( $body, 'query ' . $operation . '(' ) && ! str_contains( $body, 'mutation ' . $operation . '(' ) ) {
					return $forward( $url, $headers, $body, $timeout );
				}
				return array(
					'status' => 200,
					'body'   => $answer,
				);
			}
		);
	};

	// A store whose answers to `$operation` come from the server, then pass through `$edit`.
	$edited = static function ( string $operation, callable $edit ) use ( $t, $forward ): Convograph_Conversation_Store {
		return new Convograph_Conversation_Store(
			$t->env->url,
			$t->env->token,
			static function ( string $url, array $headers, string $body, float $timeout ) use ( $operation, $edit, $forward ): array {
				$response = $forward( $url, $headers, $body, $timeout );
				if ( ! str_contains( $body, 'query ' . $operation . '(' ) ) {
					return $response;
				}
				$response['body'] = json_encode( $edit( json_decode( $response['body'], true ) ), JSON_THROW_ON_ERROR );
				return $response;
			}
		);
	};

	$slug = $t->tag . '-malformed';
	$sid  = $t->record->created( 'user:1', $s->create_session( $ws, 1, $slug, array( 'token_id' => 31 ), 'chat' ) );

	foreach ( array( '{"data":{}}', '{"data":{"conversation":"' . $sid . '"}}' ) as $answer ) {
		$store = $mangled( 'ConvographGetSession', $answer );
		$t->fails_once( null, fn () => $store->get_session( $sid ), "get_session answered {$answer}", 'conversation' );
		$t->fails_once( null, fn () => $store->get_session_for_owner( $ws, Contract_Run::USER_1, $sid ), "get_session_for_owner answered {$answer}", 'conversation' );
	}
	// A session read without its transcript is no empty transcript: a caller that adds its turn
	// to what it read and saves would replace every turn with that one.
	$turns = contract_turns( 'before a read without its transcript', 2 );
	$s->update_session( $sid, $turns );
	$store = $edited(
		'ConvographGetSession',
		static function ( array $answer ): array {
			unset( $answer['data']['conversation']['transcript'] );
			return $answer;
		}
	);
	$t->fails_once( null, fn () => $store->get_session( $sid ), 'get_session answered a session without its transcript', 'transcript' );
	$read = $t->quietly( fn () => $s->get_session( $sid ), 'the session read whole' );
	$c->same( $turns, $read['messages'] ?? null, 'its turns are all there' );
	$row = $store->get_session( $sid );
	if ( null !== $row ) {
		$store->update_session( $sid, array_merge( $row['messages'], array( array( 'role' => 'user', 'content' => 'the next turn' ) ) ), $row['metadata'] );
	}
	$c->same( $turns, ( $s->get_session( $sid ) ?? array() )['messages'] ?? null, 'a caller that saves what it read plus a turn lost no turn' );

	$store = $mangled( 'ConvographListSessions', '{"data":{}}' );
	$t->fails_once( array(), fn () => $store->list_sessions( $ws, 1, array( 'agent_slug' => $slug ) ), 'list_sessions answered {"data":{}}', 'conversations' );
	$store = $mangled( 'ConvographListSessions', '{"data":{"conversations":{"pageInfo":{"hasNextPage":false}}}}' );
	$t->fails_once( array(), fn () => $store->list_sessions( $ws, 1, array( 'agent_slug' => $slug ) ), 'list_sessions answered a page without nodes', 'nodes' );
	$store = $mangled( 'ConvographRecentPendingSession', '{"data":{}}' );
	$t->fails_once( null, fn () => $store->get_recent_pending_session( $ws, 1 ), 'get_recent_pending_session answered {"data":{}}', 'recentPendingConversation' );
	$store = $mangled( 'ConvographCreateSession', '{"data":{"createConversation":{"userErrors":[]}}}' );
	$t->fails_once( '', fn () => $store->create_session( $ws, 1, $slug ), 'create_session answered no conversation', 'conversation id' );

	// The stored metadata is read to keep its token_id: an answer without it must not replace
	// the metadata without the token_id (the session would drop out of its token's dedup).
	$store = $mangled( 'ConvographGetSessionMetadata', '{"data":{"conversation":{}}}' );
	$t->fails_once( false, fn () => $store->update_session( $sid, array( array( 'role' => 'user', 'content' => 'kept?' ) ), array( 'k' => 'v' ) ), 'update_session whose metadata read answered no metadata', 'metadata' );
	$row = $s->get_session( $sid ) ?? array();
	$c->same( array( $turns, array( 'token_id' => 31 ) ), array( $row['messages'] ?? null, $row['metadata'] ?? null ), 'nothing was saved: the transcript and the metadata with its token_id are as they were' );
	$c->same( array( $sid ), contract_ids( $s->list_sessions( $ws, 1, array( 'agent_slug' => $slug ) ) ), 'and nothing was created' );
	$t->record->expect(
		$sid,
		array(
			'metadata'   => (object) array( 'token_id' => 31 ),
			'transcript' => contract_wire_messages( $turns ),
		)
	);
}
