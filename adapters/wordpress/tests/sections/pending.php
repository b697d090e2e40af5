<?php
/**
 * get_recent_pending_session: a client retrying after a timeout finds its session instead of
 * creating a second one, per token_id; only the newest counts, and only while pending.
 *
 * @package Convograph
 */

declare( strict_types=1 );

function contract_section_pending( Contract_Run $t ): void {
	$c     = $t->c;
	$s     = $t->store;
	$ws    = $t->ws;
	$token = random_int( 1000000, 1000000000 );
	$slug  = $t->tag . '-dedup';

	// A REST chat request as the plugin handles it.
	$handle = static function ( int $token_id, string $text ) use ( $t, $s, $ws, $slug ): string {
		$pending = $s->get_recent_pending_session( $ws, 1, 60, 'rest', $token_id );
		if ( null !== $pending ) {
			return (string) $pending['session_id'];
		}
		$metadata = array(
			'token_id'      => $token_id,
			'first_message' => $text,
		);
		return $t->record->created( 'user:1', $s->create_session( $ws, 1, $slug, $metadata, 'rest' ) );
	};

	$first = $t->quietly( fn () => $handle( $token, 'hello' ), 'first request' );
	$c->check( '' !== $first, 'the first request creates a session' );
	$c->same( $first, $handle( $token, 'hello' ), 'a retry finds it (empty transcript = pending)' );
	$row = $s->get_recent_pending_session( $ws, 1, 60, 'rest', $token ) ?? array();
	$c->same( CONTRACT_ROW_KEYS, array_keys( $row ), 'the pending row has every key, messages included' );
	$c->same( array( '1', 1, $token, array() ), array( $row['owner_key'] ?? null, $row['user_id'] ?? null, $row['metadata']['token_id'] ?? null, $row['messages'] ?? null ), 'owner as given, token_id in metadata, no messages yet' );

	$lock = $s->acquire_session_lock( $first, 60 );
	$c->check( is_string( $lock ), 'the request takes the session lock' );
	$c->same( true, $s->update_session( $first, array( contract_envelope( 'text', 'user', 'hello' ) ) ), 'the user turn is saved' );
	$c->same( $first, $handle( $token, 'hello' ), 'a retry while it is locked (being answered) finds it' );
	$answered = array( contract_envelope( 'text', 'user', 'hello' ), contract_envelope( 'text', 'assistant', 'hi!' ) );
	$c->same( true, $s->update_session( $first, $answered ), 'the answer is saved' );
	$c->same( true, $s->release_session_lock( $first, (string) $lock ), 'the lock is released' );
	$c->same( null, $s->get_recent_pending_session( $ws, 1, 60, 'rest', $token ), 'answered and unlocked: not pending' );

	$second = $handle( $token, 'another question' );
	$c->check( '' !== $second && $second !== $first, 'the next request is a new session' );
	$third = $handle( $token + 1, 'hello' );
	$c->check( '' !== $third && ! in_array( $third, array( $first, $second ), true ), 'another token_id never reuses this one\'s session' );
	$c->same( $third, ( $s->get_recent_pending_session( $ws, 1, 60, 'rest' ) ?? array() )['session_id'] ?? null, 'without token_id: the newest pending session of the context' );
	$c->same( null, $s->get_recent_pending_session( $ws, 1, 60, 'cron-' . $t->tag, $token ), 'another context: nothing' );

	$c->same( null, $s->get_recent_pending_session( $ws, 2, 600, 'rest', $token ), 'user 2 never gets user 1\'s pending session' );
	$c->same( null, $s->get_recent_pending_session_for_owner( $ws, Contract_Run::USER_2, 600, 'rest', $token ), 'nor through the owner method' );
	$c->same( $second, ( $s->get_recent_pending_session_for_owner( $ws, Contract_Run::USER_1, 600, 'rest', $token ) ?? array() )['session_id'] ?? null, 'the owner method finds user 1\'s' );
	$t->quietly( fn () => $s->get_recent_pending_session( $ws, 1, 0, 'rest', $token ), 'seconds 0 (counts as 1, as the bundled store)' );
	$c->same( $second, ( $s->get_recent_pending_session( $ws, 1, PHP_INT_MAX, 'rest', $token ) ?? array() )['session_id'] ?? null, 'a window past GraphQL\'s Int still finds it (not null: a retry would create a second session)' );

	// Only the newest counts: an older session still pending is not returned once a newer one
	// has been answered.
	$older_token = $token + 3;
	$older       = $t->record->created( 'user:1', $s->create_session( $ws, 1, $slug, array( 'token_id' => $older_token ), 'rest' ) );
	$newer       = $t->record->created( 'user:1', $s->create_session( $ws, 1, $slug, array( 'token_id' => $older_token ), 'rest' ) );
	$c->same( $newer, ( $s->get_recent_pending_session( $ws, 1, 600, 'rest', $older_token ) ?? array() )['session_id'] ?? null, 'two pending sessions: the newer one' );
	$c->same( true, $s->update_session( $newer, $answered ), 'the newer one is answered' );
	$c->same( null, $s->get_recent_pending_session( $ws, 1, 600, 'rest', $older_token ), 'the newest is answered: null, though the older is still pending' );
	$c->same( $older, ( $s->get_session( $older ) ?? array() )['session_id'] ?? null, 'the older one still exists' );

	// token_id as the bundled store matches it: an int, whatever type the metadata held.
	$string_token = $token + 2;
	$as_string    = $t->record->created( 'user:1', $s->create_session( $ws, 1, $slug, array( 'token_id' => (string) $string_token ), 'rest' ) );
	$c->same( $as_string, ( $s->get_recent_pending_session( $ws, 1, 60, 'rest', $string_token ) ?? array() )['session_id'] ?? null, "metadata token_id '{$string_token}' (a string) matches token_id {$string_token}" );

	// update_session() replaced the metadata (with array()): only the token_id was kept.
	$c->same( array( 'token_id' => $token ), ( $s->get_session( $first ) ?? array() )['metadata'] ?? null, 'the saves replaced the metadata but kept its token_id' );
	$t->record->expect(
		$first,
		array(
			'transcript' => contract_wire_messages( $answered ),
			'metadata'   => (object) array( 'token_id' => $token ),
			'context'    => 'rest',
		)
	);
}
