<?php
/**
 * update_session replaces the complete transcript and the metadata, keeps provider/model on ''
 * and the response id on null, and stores every envelope losslessly; update_title; delete is
 * idempotent.
 *
 * @package Convograph
 */

declare( strict_types=1 );

function contract_section_updates( Contract_Run $t ): void {
	$c   = $t->c;
	$s   = $t->store;
	$ws  = $t->ws;
	$all = contract_all_envelopes();
	$sid = $t->record->created( 'user:1', $s->create_session( $ws, 1, $t->tag . '-update', array( 'token_id' => 7 ) ) );

	$ok = $t->quietly( fn () => $s->update_session( $sid, array_slice( $all, 0, 3 ), array( 'token_id' => 7, 'summary' => 'refund' ), 'openai', 'gpt-4.1', 'resp_1' ), 'update_session with provider, model, response id' );
	$c->same( true, $ok, 'update_session returns true' );
	$row = $s->get_session( $sid ) ?? array();
	$c->same( array_slice( $all, 0, 3 ), $row['messages'] ?? null, 'the transcript is the one given' );
	$c->same( array( 'token_id' => 7, 'summary' => 'refund' ), $row['metadata'] ?? null, 'the metadata is the one given' );
	$c->same( array( 'openai', 'gpt-4.1', 'resp_1' ), array( $row['provider'] ?? null, $row['model'] ?? null, $row['provider_response_id'] ?? null ), 'provider, model, response id set' );

	$c->same( true, $s->update_session( $sid, array( $all[2] ) ), 'update_session(one message, defaults)' );
	$row = $s->get_session( $sid ) ?? array();
	$c->same( array( $all[2] ), $row['messages'] ?? null, 'the complete transcript is replaced (it may shrink)' );
	$c->same( array( 'token_id' => 7 ), $row['metadata'] ?? null, 'the metadata is replaced, by array() too, except token_id (the bundled store keeps it apart, for dedup)' );
	$c->same( array( 'openai', 'gpt-4.1', 'resp_1' ), array( $row['provider'] ?? null, $row['model'] ?? null, $row['provider_response_id'] ?? null ), "provider and model kept on '', response id kept on null" );

	$final_meta = array( 'token_id' => 7, 'nested' => array( 'list' => array( 1, 2.5, 'x' ), 'empty' => array() ) );
	$c->same( true, $s->update_session( $sid, $all, $final_meta, '', 'gpt-4.1-mini', 'resp_2' ), 'update_session(every envelope, new model and response id)' );
	$row = $s->get_session( $sid ) ?? array();
	$c->same( $all, $row['messages'] ?? null, 'every envelope comes back exactly (===: ints, floats, nulls, empty arrays, NUL, emoji)' );
	$c->same( $final_meta, $row['metadata'] ?? null, 'nested metadata comes back exactly' );
	$c->same( array( 'openai', 'gpt-4.1-mini', 'resp_2' ), array( $row['provider'] ?? null, $row['model'] ?? null, $row['provider_response_id'] ?? null ), 'the model and response id change, the provider stays' );
	$c->same( true, $s->update_session( $sid, $all, $final_meta ), 'saving the same complete transcript again' );
	$c->same( $all, ( $s->get_session( $sid ) ?? array() )['messages'] ?? null, 'changes nothing stored' );

	$c->same( true, $t->quietly( fn () => $s->update_title( $sid, '' ), "update_title('')" ), "update_title('') returns true" );
	$c->same( '', ( $s->get_session( $sid ) ?? array() )['title'] ?? null, "the title is ''" );
	$c->same( true, $s->update_title( $sid, 'Refund for #1001 ✓' ), 'update_title returns true' );
	$c->same( 'Refund for #1001 ✓', ( $s->get_session( $sid ) ?? array() )['title'] ?? null, 'the title is stored' );
	$t->record->expect(
		$sid,
		array(
			'transcript'         => contract_wire_messages( $all ),
			'metadata'           => (object) $final_meta,
			'title'              => 'Refund for #1001 ✓',
			'provider'           => 'openai',
			'model'              => 'gpt-4.1-mini',
			'providerResponseId' => 'resp_2',
			'messageCount'       => count( $all ),
		)
	);

	// PHP arrays that are not JSON objects.
	$odd = $t->record->created( 'user:1', $s->create_session( $ws, 1, $t->tag . '-odd', array( 'x', 'y' ) ) );
	$c->same( array( 'x', 'y' ), ( $s->get_session( $odd ) ?? array() )['metadata'] ?? null, 'list metadata comes back as the same PHP array' );
	$keyed = array(
		'first'  => contract_envelope( 'text', 'user', 'a' ),
		'second' => contract_envelope( 'text', 'assistant', 'b' ),
	);
	$c->same( true, $s->update_session( $odd, $keyed, array() ), 'update_session(messages keyed by strings)' );
	$c->same( array_values( $keyed ), ( $s->get_session( $odd ) ?? array() )['messages'] ?? null, 'the transcript is stored as a list (array_values, as the bundled store)' );
	$c->same( array(), ( $s->get_session( $odd ) ?? array() )['metadata'] ?? null, 'without a token_id, array() replaces all the metadata' );
	// convograph wants a role on every message (the bundled store stores anything).
	$t->fails_once( false, fn () => $s->update_session( $odd, array( array( 'content' => 'no role' ) ), array() ), 'update_session(a message without a role)', 'INVALID_INPUT' );
	$c->same( array_values( $keyed ), ( $s->get_session( $odd ) ?? array() )['messages'] ?? null, 'the refused transcript changed nothing' );
	$c->same( true, $s->update_session( $odd, array(), array() ), 'update_session(empty transcript)' );
	$c->same( array(), ( $s->get_session( $odd ) ?? array() )['messages'] ?? null, 'the transcript is empty again' );
	$t->record->expect( $odd, array( 'transcript' => array(), 'metadata' => new stdClass() ) );

	// Missing sessions.
	$missing = '00000000-0000-4000-8000-' . substr( bin2hex( random_bytes( 6 ) ), 0, 12 );
	$t->fails_once( false, fn () => $s->update_title( $missing, 'x' ), 'update_title(unknown id)', 'NOT_FOUND' );
	$t->fails_once( false, fn () => $s->update_session( $missing, array() ), 'update_session(unknown id)', 'NOT_FOUND' );
	$c->same( null, $t->quietly( fn () => $s->get_session( $missing ), 'get_session(unknown id)' ), 'get_session(unknown id) is null' );
	$c->same( null, $s->get_session( '' ), "get_session('') is null" );
	$c->same( null, $s->get_session( 'not-a-uuid' ), 'get_session(not a UUID) is null' );

	// Delete, idempotent.
	$gone = $s->create_session( $ws, 1, $t->tag . '-delete' );
	$c->same( true, $t->quietly( fn () => $s->delete_session( $gone ), 'delete_session' ), 'delete_session returns true' );
	$c->same( null, $s->get_session( $gone ), 'the session is gone' );
	$c->same( null, $s->get_session_for_owner( $ws, Contract_Run::USER_1, $gone ), 'gone for its owner too' );
	$c->same( true, $t->quietly( fn () => $s->delete_session( $gone ), 'delete_session again' ), 'deleting again: true (idempotent)' );
	$c->same( true, $t->quietly( fn () => $s->delete_session( $missing ), 'delete_session(unknown id)' ), 'deleting an id that never existed: true' );
	$c->same( true, $s->delete_session( '' ), "delete_session(''): true" );
	$t->fails_once( false, fn () => $s->update_session( $gone, contract_turns( 'late', 1 ) ), 'update_session after delete', 'NOT_FOUND' );
	$c->same( array(), contract_ids( $s->list_sessions( $ws, 1, array( 'agent_slug' => $t->tag . '-delete' ) ) ), 'a deleted session is not listed' );
	$t->record->deleted( $gone );
}
