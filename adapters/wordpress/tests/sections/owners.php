<?php
/**
 * Two owners through one token: each sees only its own sessions, through the int-user and the
 * `_for_owner` methods alike; the rows carry the bundled store's keys.
 *
 * @package Convograph
 */

declare( strict_types=1 );

const CONTRACT_UUID4 = '/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/';

const CONTRACT_ROW_KEYS = array(
	'session_id',
	'workspace_type',
	'workspace_id',
	'owner_type',
	'owner_key',
	'user_id',
	'agent_slug',
	'title',
	'messages',
	'metadata',
	'context',
	'mode',
	'provider',
	'model',
	'provider_response_id',
	'created_at',
	'updated_at',
	'last_read_at',
	'expires_at',
);

const CONTRACT_ISO8601 = '/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/';

function contract_section_owners( Contract_Run $t ): void {
	$c    = $t->c;
	$s    = $t->store;
	$ws   = $t->ws;
	$slug = $t->tag . '-own';
	$meta = array(
		'token_id' => 7,
		'origin'   => array(
			'url' => 'https://example.test',
			'ids' => array( 1, 2, 3 ),
		),
	);

	$one = $t->quietly( fn () => $t->record->created( 'user:1', $s->create_session( $ws, 1, $slug, $meta, 'chat' ) ), 'create_session(user 1)' );
	$two = $t->quietly( fn () => $t->record->created( 'user:2', $s->create_session_for_owner( $ws, Contract_Run::USER_2, $slug, array(), 'chat' ) ), 'create_session_for_owner(user 2)' );
	$c->check( 1 === preg_match( CONTRACT_UUID4, $one ) && 1 === preg_match( CONTRACT_UUID4, $two ), 'creates return UUIDv4 ids', "{$one} {$two}" );

	$c->same( array( $one ), contract_ids( $s->list_sessions( $ws, 1, array( 'agent_slug' => $slug ) ) ), 'list_sessions(user 1): only its own session' );
	$c->same( array( $one ), contract_ids( $s->list_sessions_for_owner( $ws, Contract_Run::USER_1, array( 'agent_slug' => $slug ) ) ), 'list_sessions_for_owner(user 1): the same' );
	$c->same( array( $two ), contract_ids( $s->list_sessions( $ws, 2, array( 'agent_slug' => $slug ) ) ), 'list_sessions(user 2): only its own session' );
	$c->same( array( $two ), contract_ids( $s->list_sessions_for_owner( $ws, Contract_Run::USER_2, array( 'agent_slug' => $slug ) ) ), 'list_sessions_for_owner(user 2): the same' );
	$c->check( ! in_array( $one, contract_ids( $s->list_sessions( $ws, 2, array( 'limit' => 1000 ) ) ), true ), 'user 2\'s unfiltered list never shows user 1\'s session' );
	$c->check( ! in_array( $two, contract_ids( $s->list_sessions( $ws, 1, array( 'limit' => 1000 ) ) ), true ), 'user 1\'s unfiltered list never shows user 2\'s session' );
	$c->same( array(), contract_ids( $s->list_sessions( $ws, 3, array( 'agent_slug' => $slug ) ) ), 'user 3 owns nothing' );

	$c->same( null, $s->get_session_for_owner( $ws, Contract_Run::USER_1, $two ), 'get_session_for_owner(user 1, user 2\'s id) is null' );
	$c->same( null, $s->get_session_for_owner( $ws, Contract_Run::USER_2, $one ), 'get_session_for_owner(user 2, user 1\'s id) is null' );
	$c->same( null, $s->get_session_for_owner( $ws, array( 'type' => 'audience', 'key' => '1' ), $one ), 'another owner type with the same key is another owner' );
	$theirs = $s->get_session_for_owner( $ws, Contract_Run::USER_2, $two );
	$c->same( array( 'user', '2', 2 ), array( $theirs['owner_type'] ?? null, $theirs['owner_key'] ?? null, $theirs['user_id'] ?? null ), 'get_session_for_owner(user 2): the owner as given, user_id 2' );
	$as_int = $s->get_session_for_owner( $ws, array( 'type' => ' User ', 'key' => 2 ), $two );
	$c->same( array( $two, 'user', '2' ), array( $as_int['session_id'] ?? null, $as_int['owner_type'] ?? null, $as_int['owner_key'] ?? null ), 'an owner type is normalised and an int key accepted' );

	// An owner key beyond ASCII (opaque to Agents API) travels in the header as UTF-8, which
	// convograph reads as such: two such keys are two owners. Refused before, whatever the
	// server made of it: every call for that owner failed. (SERVICE mode: no token to emulate it.)
	if ( ! $t->env->emulated() ) {
		$equipe = array(
			'type' => 'audience',
			'key'  => 'équipe-α 7',
		);
		$other  = array(
			'type' => 'audience',
			'key'  => 'équipe-β 7',
		);
		$equipe_id = $t->quietly( fn () => $t->record->created( 'audience:' . $equipe['key'], $s->create_session_for_owner( $ws, $equipe, $slug ) ), 'create_session_for_owner(a UTF-8 key)' );
		$c->check( 1 === preg_match( CONTRACT_UUID4, $equipe_id ), 'create_session_for_owner(a UTF-8 key) returns an id', $equipe_id );
		$c->same( array( $equipe_id ), contract_ids( $s->list_sessions_for_owner( $ws, $equipe, array( 'agent_slug' => $slug ) ) ), 'list_sessions_for_owner(a UTF-8 key): its session' );
		$c->same( array(), contract_ids( $s->list_sessions_for_owner( $ws, $other, array( 'agent_slug' => $slug ) ) ), 'another UTF-8 key is another owner' );
		$row = $s->get_session_for_owner( $ws, $equipe, $equipe_id ) ?? array();
		$c->same( array( $equipe_id, 'audience', $equipe['key'] ), array( $row['session_id'] ?? null, $row['owner_type'] ?? null, $row['owner_key'] ?? null ), 'get_session_for_owner(a UTF-8 key): the owner as given' );
		$c->same( null, $s->get_session_for_owner( $ws, $other, $equipe_id ), 'get_session_for_owner(another UTF-8 key) is null' );

		// Keys are opaque: a no-break space, a soft hyphen, an emoji made with a zero-width
		// joiner, an ideographic space at the end each name an owner (the server refused
		// them as "not printable" before, though the adapter sent them).
		foreach ( array( "Ada\u{A0}Lovelace", "co\u{AD}op", "\u{1F469}\u{200D}\u{1F4BB}", "\u{3042}\u{3000}" ) as $key ) {
			$opaque = array(
				'type' => 'audience',
				'key'  => $key,
			);
			$made   = $t->quietly( fn () => $t->record->created( 'audience:' . $key, $s->create_session_for_owner( $ws, $opaque, $slug ) ), 'create_session_for_owner(an opaque key)' );
			$c->check( 1 === preg_match( CONTRACT_UUID4, $made ), 'create_session_for_owner(' . json_encode( $key ) . ') returns an id', $made );
			$c->same( array( $made ), contract_ids( $s->list_sessions_for_owner( $ws, $opaque, array( 'agent_slug' => $slug ) ) ), 'list_sessions_for_owner(' . json_encode( $key ) . '): its session' );
		}
	}

	// The row.
	$row = $s->get_session_for_owner( $ws, Contract_Run::USER_1, $one ) ?? array();
	$c->same( CONTRACT_ROW_KEYS, array_keys( $row ), 'a row has the bundled store\'s keys, in its order' );
	$c->same(
		array(
			'session_id'           => $one,
			'workspace_type'       => $ws->workspace_type,
			'workspace_id'         => $ws->workspace_id,
			'owner_type'           => 'user',
			'owner_key'            => '1',
			'user_id'              => 1,
			'agent_slug'           => $slug,
			'title'                => '',
			'messages'             => array(),
			'metadata'             => $meta,
			'context'              => 'chat',
			'mode'                 => 'chat',
			'provider'             => '',
			'model'                => '',
			'provider_response_id' => null,
			'last_read_at'         => null,
			'expires_at'           => null,
		),
		array_diff_key( $row, array_flip( array( 'created_at', 'updated_at' ) ) ),
		'a new session\'s row'
	);
	$c->check( 1 === preg_match( CONTRACT_ISO8601, (string) ( $row['created_at'] ?? '' ) ) && 1 === preg_match( CONTRACT_ISO8601, (string) ( $row['updated_at'] ?? '' ) ), 'created_at and updated_at are ISO-8601', Contract_Checks::show( array( $row['created_at'] ?? null, $row['updated_at'] ?? null ) ) );
	$by_id = $s->get_session( $one );
	$c->same(
		array_merge( $row, array( 'owner_key' => '', 'user_id' => 0 ) ),
		$by_id,
		'get_session(id): the same row; owner_key \'\' and user_id 0 (convograph keeps only a digest of the key)'
	);
	$t->record->expect(
		$one,
		array(
			'agentSlug' => $slug,
			'context'   => 'chat',
			'metadata'  => (object) $meta,
			'title'     => null,
		)
	);

	// The methods that carry only a session id act as the token itself.
	if ( $t->env->emulated() ) {
		$c->same( null, $s->get_session( $two ), 'pre-SERVICE: the id-only token (user 1\'s WRITE token) cannot read user 2\'s session' );
		$t->record->expect( $two, array( 'metadata' => new stdClass(), 'title' => null ) );
		return;
	}
	$other = $s->get_session( $two );
	$c->same( array( $two, 'user', '', 0 ), array( $other['session_id'] ?? null, $other['owner_type'] ?? null, $other['owner_key'] ?? null, $other['user_id'] ?? null ), 'SERVICE: get_session(id) reaches user 2\'s session too' );
	$c->same( true, $t->quietly( fn () => $s->update_title( $two, 'titled by the site' ), 'SERVICE: update_title(user 2\'s id)' ), 'SERVICE: update_title(id) writes user 2\'s session' );
	$t->record->expect(
		$two,
		array(
			'metadata' => new stdClass(),
			'title'    => 'titled by the site',
		)
	);
}
