<?php
/**
 * What the store refuses before sending anything: invalid UTF-8 (PHP cannot encode it as JSON;
 * the bundled store would save '[]' instead), messages that are not arrays, owners that cannot
 * name a convograph owner, a workspace that is not the token's. Nothing stored changes.
 *
 * @package Convograph
 */

declare( strict_types=1 );

use AgentsAPI\Core\Workspace\WP_Agent_Workspace_Scope;

function contract_section_bad_input( Contract_Run $t ): void {
	$c     = $t->c;
	$s     = $t->store;
	$ws    = $t->ws;
	$turns = contract_turns( 'kept', 2 );
	$sid   = $t->record->created( 'user:1', $s->create_session( $ws, 1, $t->tag . '-utf8' ) );
	$s->update_session( $sid, $turns );
	$s->update_title( $sid, 'kept title' );
	$t->record->expect(
		$sid,
		array(
			'transcript' => contract_wire_messages( $turns ),
			'title'      => 'kept title',
		)
	);

	$bad = "caf\xC3\x28 \xFF";
	$t->fails_once( false, fn () => $s->update_session( $sid, array( contract_envelope( 'text', 'user', $bad ) ) ), 'update_session(invalid UTF-8 content)', 'UTF-8' );
	$t->fails_once( false, fn () => $s->update_session( $sid, $turns, array( 'note' => $bad ) ), 'update_session(invalid UTF-8 metadata)', 'UTF-8' );
	$t->fails_once( false, fn () => $s->update_title( $sid, $bad ), 'update_title(invalid UTF-8)', 'UTF-8' );
	$t->fails_once( false, fn () => $s->update_session( $sid, array( 'just a string' ) ), 'update_session(a message that is a string)', 'not an array' );
	$t->fails_once( false, fn () => $s->update_session( $sid, $turns, array( 'ratio' => NAN ) ), 'update_session(NAN in metadata)', 'NaN' );
	$row = $s->get_session( $sid ) ?? array();
	$c->same( array( $turns, array(), 'kept title' ), array( $row['messages'] ?? null, $row['metadata'] ?? null, $row['title'] ?? null ), 'the stored session is unchanged' );
	$t->fails_once( '', fn () => $s->create_session( $ws, 1, $t->tag . '-utf8-new', array( 'note' => $bad ) ), 'create_session(invalid UTF-8 metadata)', 'UTF-8' );
	$t->fails_once( '', fn () => $s->create_session( $ws, 1, "bad\xE2\x82" ), 'create_session(invalid UTF-8 agent_slug)', 'UTF-8' );
	$c->same( array(), $s->list_sessions( $ws, 1, array( 'agent_slug' => $t->tag . '-utf8-new' ) ), 'no session was created' );

	// Owners that cannot be sent: nothing goes out.
	$sent     = 0;
	$counting = new Convograph_Conversation_Store(
		$t->env->url,
		$t->env->token,
		static function ( string $url, array $headers, string $body, float $timeout ) use ( &$sent ): array {
			++$sent;
			return Convograph_Http::curl( $url, $headers, $body, $timeout );
		}
	);
	$owners = array(
		'unknown type'      => array( 'type' => 'robot', 'key' => '1' ),
		'no type'           => array( 'key' => '1' ),
		'empty key'         => array( 'type' => 'user', 'key' => '' ),
		'no key'            => array( 'type' => 'user' ),
		'surrounding space' => array( 'type' => 'user', 'key' => ' 7' ),
		'CR LF in the key'  => array( 'type' => 'user', 'key' => "7\r\nX-Injected: 1" ),
		'tab in the key'    => array( 'type' => 'user', 'key' => "7\t8" ),
		'C1 control in key' => array( 'type' => 'user', 'key' => "7\u{85}8" ),
		'not UTF-8 key'     => array( 'type' => 'audience', 'key' => "zo\xEB" ),
		'array key'         => array( 'type' => 'user', 'key' => array( '7' ) ),
	);
	foreach ( $owners as $name => $owner ) {
		$t->fails_once( '', fn () => $counting->create_session_for_owner( $ws, $owner ), "create_session_for_owner({$name})", 'owner' );
		$t->fails_once( array(), fn () => $counting->list_sessions_for_owner( $ws, $owner ), "list_sessions_for_owner({$name})", 'owner' );
		$t->fails_once( null, fn () => $counting->get_session_for_owner( $ws, $owner, $sid ), "get_session_for_owner({$name})", 'owner' );
		$t->fails_once( null, fn () => $counting->get_recent_pending_session_for_owner( $ws, $owner ), "get_recent_pending_session_for_owner({$name})", 'owner' );
	}
	$c->same( 0, $sent, 'not one request was sent for an invalid owner' );

	// The workspace comes from the token: another one is refused, not mixed into it.
	$elsewhere = WP_Agent_Workspace_Scope::from_parts( $ws->workspace_type, $ws->workspace_id . '-other' );
	$t->fails_once( '', fn () => $s->create_session( $elsewhere, 1, $t->tag . '-elsewhere' ), 'create_session(another workspace)', "is not this token's workspace" );
	$t->fails_once( array(), fn () => $s->list_sessions( $elsewhere, 1 ), 'list_sessions(another workspace)', "is not this token's workspace" );
	$t->fails_once( null, fn () => $s->get_recent_pending_session( $elsewhere, 1 ), 'get_recent_pending_session(another workspace)', "is not this token's workspace" );
	$t->fails_once( null, fn () => $s->get_session_for_owner( $elsewhere, Contract_Run::USER_1, $sid ), 'get_session_for_owner(another workspace)', "is not this token's workspace" );
	$c->same( array(), $s->list_sessions( $ws, 1, array( 'agent_slug' => $t->tag . '-elsewhere' ) ), 'nothing was created in the token\'s workspace' );
	$spelled = WP_Agent_Workspace_Scope::from_parts( ' ' . strtoupper( $ws->workspace_type ) . ' ', ' ' . $ws->workspace_id . ' ' );
	$c->same( $sid, ( $s->get_session_for_owner( $spelled, Contract_Run::USER_1, $sid ) ?? array() )['session_id'] ?? null, 'the same workspace spelled with capitals and spaces is the same workspace' );
}
