<?php
/**
 * Refusals by the real server: a revoked token (401), a body over its limit (413), and, once
 * the server has SERVICE tokens, a plain WRITE token that tries to act for an owner (403); and
 * by the store itself, before any request: a token holding a line break.
 *
 * @package Convograph
 */

declare( strict_types=1 );

function contract_section_refusals( Contract_Run $t ): void {
	$c  = $t->c;
	$ws = $t->ws;
	$s  = $t->store;

	$turns = contract_turns( 'before the refusals', 2 );
	$sid   = $t->record->created( 'user:1', $s->create_session( $ws, 1, $t->tag . '-refused' ) );
	$s->update_session( $sid, $turns );
	$t->record->expect( $sid, array( 'transcript' => contract_wire_messages( $turns ) ) );

	if ( null === $t->env->revoked_token ) {
		fwrite( STDOUT, "  NOT RUN  revoked token: set CONVOGRAPH_REVOKED_TOKEN\n" );
	} else {
		$revoked = new Convograph_Conversation_Store( $t->env->url, $t->env->revoked_token, Convograph_Http::curl( ... ) );
		foreach ( contract_every_method( $revoked, $ws, $sid ) as $name => [ $failure, $call ] ) {
			$t->fails_once( $failure, $call, "revoked token: {$name}", 'HTTP 401' );
		}
	}

	// A site token read with its line break (a file, an environment variable) is refused before
	// any request, saying so: it went out as given, and the server answered a bare HTTP 400, or
	// took what followed the line break for another header of the request.
	$slug = $t->tag . '-token-line-break';
	foreach ( array( 'curl' => Convograph_Http::curl( ... ), 'streams' => Convograph_Http::streams( ... ) ) as $via => $http ) {
		foreach ( array( "\n", "\r\n", "\r\nX-Injected: 1" ) as $suffix ) {
			$broken = new Convograph_Conversation_Store( $t->env->url, $t->env->token . $suffix, $http );
			$t->fails_once( '', fn () => $broken->create_session( $ws, 1, $slug ), "{$via}: a token followed by " . json_encode( $suffix ) . ': create_session', 'control character' );
			$t->fails_once( null, fn () => $broken->get_session( $sid ), "{$via}: a token followed by " . json_encode( $suffix ) . ': get_session', 'control character' );
		}
	}
	$c->same( array(), $s->list_sessions( $ws, 1, array( 'agent_slug' => $slug ) ), 'nothing was created with a token holding a line break' );

	// One byte over the server's body limit, in messages well under the per-message limit.
	$chunk    = str_repeat( 'x', 64 * 1024 );
	$messages = array_fill( 0, intdiv( $t->env->max_body_bytes, strlen( $chunk ) ) + 2, contract_envelope( 'text', 'user', $chunk ) );
	$t->fails_once( false, fn () => $s->update_session( $sid, $messages ), 'update_session over the body limit (' . $t->env->max_body_bytes . ' bytes)', 'HTTP 413' );
	$c->same( $turns, ( $s->get_session( $sid ) ?? array() )['messages'] ?? null, 'after the 413 the stored transcript is unchanged' );
	unset( $messages );

	if ( $t->env->emulated() ) {
		fwrite( STDOUT, "  NOT RUN  a WRITE token acting for an owner is refused (403): needs the SERVICE scope on the server\n" );
		return;
	}
	if ( null === $t->env->write_token ) {
		fwrite( STDOUT, "  NOT RUN  a WRITE token acting for an owner: set CONVOGRAPH_WRITE_TOKEN\n" );
		return;
	}
	$plain = new Convograph_Conversation_Store( $t->env->url, $t->env->write_token, Convograph_Http::curl( ... ) );
	$t->fails_once( '', fn () => $plain->create_session( $ws, 1, $t->tag . '-not-service' ), 'a WRITE token as the site token: create_session', 'HTTP 403' );
	$t->fails_once( array(), fn () => $plain->list_sessions( $ws, 1 ), 'a WRITE token as the site token: list_sessions', 'HTTP 403' );
	$t->fails_once( null, fn () => $plain->get_session_for_owner( $ws, Contract_Run::USER_1, $sid ), 'a WRITE token as the site token: get_session_for_owner', 'HTTP 403' );
	$c->same( array(), $s->list_sessions( $ws, 1, array( 'agent_slug' => $t->tag . '-not-service' ) ), 'nothing was created by the refused token' );
}
