<?php
/**
 * Writers in separate PHP processes on one session: unlocked full-transcript writers end with
 * one writer's complete transcript (never a mix); writers that take the lock lose no turn.
 * Writers that read, add a turn and save without the lock (Agents API's get, modify, update)
 * lose no turn either: of those that read the same version, one saves and the others get
 * false and store nothing (agents-api #74, #82). In this process too, store by store, with
 * the answer to a save lost on the way.
 *
 * @package Convograph
 */

declare( strict_types=1 );

const CONTRACT_WRITERS = 4;

function contract_section_concurrency( Contract_Run $t ): void {
	$c    = $t->c;
	$s    = $t->store;
	$base = contract_turns( 'base', 2 );

	// Unlocked: last write wins, and it is always one writer's whole transcript.
	$sid = $t->record->created( 'user:1', $s->create_session( $t->ws, 1, $t->tag . '-race' ) );
	$s->update_session( $sid, $base );
	$results = contract_run_writers( $t, 'replace', $sid, 8 );
	$c->same( array_fill( 0, CONTRACT_WRITERS, 8 ), array_column( $results, 'saved' ), CONTRACT_WRITERS . ' writers x 8 unlocked saves all succeed' );
	$final      = ( $s->get_session( $sid ) ?? array() )['messages'] ?? null;
	$candidates = array();
	for ( $w = 0; $w < CONTRACT_WRITERS; $w++ ) {
		$candidates[] = contract_turns( "writer {$w}", 6 );
	}
	$c->check( in_array( $final, $candidates, true ), 'the stored transcript is exactly one writer\'s complete transcript', 'stored: ' . Contract_Checks::show( array_column( (array) $final, 'content' ) ) );
	$t->record->expect( $sid, array( 'transcript' => contract_wire_messages( is_array( $final ) ? $final : array() ) ) );

	// Under the lock: read, append, write; every turn of every writer survives.
	$sid = $t->record->created( 'user:1', $s->create_session( $t->ws, 1, $t->tag . '-locked' ) );
	$s->update_session( $sid, $base );
	$results = contract_run_writers( $t, 'append', $sid, 5 );
	$c->same( array_fill( 0, CONTRACT_WRITERS, 5 ), array_column( $results, 'saved' ), CONTRACT_WRITERS . ' writers x 5 locked appends all succeed' );
	$c->check( array_sum( array_column( $results, 'lock_waits' ) ) > 0, 'the writers did contend for the lock', 'lock waits: ' . Contract_Checks::show( array_column( $results, 'lock_waits' ) ) );
	$final = ( $s->get_session( $sid ) ?? array() )['messages'] ?? array();
	$turns = array_column( array_slice( $final, 2 ), 'content' );
	sort( $turns );
	$expected = array();
	for ( $w = 0; $w < CONTRACT_WRITERS; $w++ ) {
		for ( $k = 0; $k < 5; $k++ ) {
			$expected[] = "worker {$w} turn {$k}";
		}
	}
	sort( $expected );
	$c->same( $base, array_slice( $final, 0, 2 ), 'the transcript still starts with the base turns' );
	$c->same( $expected, $turns, 'every appended turn is there exactly once (' . count( $expected ) . ')' );
	$t->record->expect( $sid, array( 'messageCount' => 2 + count( $expected ) ) );

	contract_read_modify_processes( $t, $base );
	contract_read_modify_in_turn( $t, $base );
	contract_read_modify_lost_answer( $t, $base );
	contract_title_between( $t, $base );
}

/**
 * Unlocked writer processes that each read the session, add a turn and save at the same time.
 *
 * @param list<array<string,mixed>> $base
 */
function contract_read_modify_processes( Contract_Run $t, array $base ): void {
	$c   = $t->c;
	$s   = $t->store;
	$sid = $t->record->created( 'user:1', $s->create_session( $t->ws, 1, $t->tag . '-read-modify' ) );
	$s->update_session( $sid, $base );
	$results = contract_run_writers( $t, 'read_modify', $sid, 1, 1.0 );

	// Writers that read the same transcript (normally all of them: they read a second before
	// any saves): exactly one saves. The stored transcript holds every saved turn, no other.
	$by_read = array();
	foreach ( $results as $w => $result ) {
		$by_read[ (int) ( $result['read'] ?? -1 ) ][ $w ] = $result;
	}
	ksort( $by_read );
	$c->check( max( array_map( 'count', $by_read ) ) >= 2, 'at least two writers read the same transcript before either saved', 'messages read: ' . Contract_Checks::show( array_column( $results, 'read' ) ) );
	$expected = $base;
	foreach ( $by_read as $read => $group ) {
		$saved = array_keys( array_filter( $group, static fn ( array $r ): bool => 1 === ( $r['saved'] ?? 0 ) ) );
		$c->same( 1, count( $saved ), count( $group ) . ' unlocked writers that read ' . $read . ' messages: exactly one saves' );
		foreach ( $saved as $w ) {
			$expected[] = contract_envelope( 'text', 'assistant', "worker {$w} read-modify turn" );
		}
		foreach ( $group as $w => $result ) {
			$logged = (array) ( $result['logged'] ?? array() );
			if ( 1 === ( $result['saved'] ?? 0 ) ) {
				$c->same( array(), $logged, "read-modify writer {$w} saved, logging nothing" );
			} else {
				$c->check( 1 === count( $logged ) && str_contains( (string) $logged[0], 'CONFLICT: a concurrent writer saved' ), "read-modify writer {$w} got false, with one log line naming the concurrent writer", 'logged: ' . Contract_Checks::show( $logged ) );
			}
		}
	}
	$final = ( $s->get_session( $sid ) ?? array() )['messages'] ?? null;
	$c->same( array_column( $expected, 'content' ), array_column( (array) $final, 'content' ), 'no saved turn was lost: the transcript is the base and every saved turn' );
	$t->record->expect( $sid, array( 'transcript' => contract_wire_messages( $expected ) ) );
}

/**
 * Two workers' stores in turn, as the reviewer's repro: both read, both save.
 *
 * @param list<array<string,mixed>> $base
 */
function contract_read_modify_in_turn( Contract_Run $t, array $base ): void {
	$c    = $t->c;
	$ws   = $t->ws;
	$sid  = $t->record->created( 'user:1', $t->store->create_session( $ws, 1, $t->tag . '-in-turn' ) );
	$read = static fn ( Convograph_Conversation_Store $store ): array => ( $store->get_session_for_owner( $ws, Contract_Run::USER_1, $sid ) ?? array() )['messages'] ?? array();
	$turn = static fn ( string $text ): array => contract_envelope( 'text', 'assistant', $text );
	$t->store->update_session( $sid, $base );

	$one  = $t->env->store();
	$two  = $t->env->store();
	$m1   = $read( $one );
	$m2   = $read( $two );
	$m1[] = $turn( 'turn from worker 1' );
	$m2[] = $turn( 'turn from worker 2' );
	$c->same( true, $t->quietly( fn () => $one->update_session( $sid, $m1 ), 'worker 1 saves' ), 'worker 1 and 2 read; worker 1 saves its turn' );
	$t->fails_once( false, fn () => $two->update_session( $sid, $m2 ), 'worker 2 saves what it read before worker 1 saved', 'CONFLICT: a concurrent writer saved' );
	$c->same( $m1, $read( $t->store ), "worker 1's turn is kept; worker 2 stored nothing" );

	$m2   = $read( $two );
	$m2[] = $turn( 'turn from worker 2' );
	$c->same( true, $two->update_session( $sid, $m2 ), 'worker 2 reads again and saves its turn on top' );
	$c->same( true, $two->update_title( $sid, 'in turn' ), 'worker 2 titles the session' );
	$m2[] = $turn( 'worker 2, a second turn' );
	$c->same( true, $t->quietly( fn () => $two->update_session( $sid, $m2 ), 'worker 2 saves again' ), 'and saves again without reading: its own save and title are not a concurrent writer' );
	$m1[] = $turn( 'worker 1, a second turn' );
	$t->fails_once( false, fn () => $one->update_session( $sid, $m1 ), 'worker 1 saves again on top of its first save', 'CONFLICT' );
	$c->same( $m2, $read( $t->store ), 'every turn saved is kept, in order' );

	$blind = $t->env->store();
	$c->same( true, $t->quietly( fn () => $blind->update_session( $sid, $m2 ), 'a store that never read the session saves' ), 'a store that has not read the session writes unconditionally (last write wins)' );
	$t->record->expect(
		$sid,
		array(
			'transcript' => contract_wire_messages( $m2 ),
			'title'      => 'in turn',
		)
	);
}

/**
 * update_session gets no answer and sends its request again. When the first attempt was saved
 * (its answer lost), the retry's CONFLICT is that save: true. When it never reached the
 * server and someone saved before the retry: false, and their turn is kept.
 *
 * @param list<array<string,mixed>> $base
 */
function contract_read_modify_lost_answer( Contract_Run $t, array $base ): void {
	$c       = $t->c;
	$ws      = $t->ws;
	$forward = $t->env->transport();
	$read    = static fn ( Convograph_Conversation_Store $store, string $sid ): array => ( $store->get_session_for_owner( $ws, Contract_Run::USER_1, $sid ) ?? array() )['messages'] ?? array();

	$sid = $t->record->created( 'user:1', $t->store->create_session( $ws, 1, $t->tag . '-lost-save', array( 'token_id' => 9 ) ) );
	$t->store->update_session( $sid, $base );
	$attempts = array();
	$lossy    = new Convograph_Conversation_Store( $t->env->url, $t->env->token, contract_losing( 'replaceTranscript', $forward, $attempts ) );
	$mine     = $read( $lossy, $sid );
	$mine[]   = contract_envelope( 'text', 'assistant', 'saved, answer lost' );
	$meta     = array(
		'step' => 'lost',
		'nested' => array( 'b' => 1.0, 'a' => array() ),
	);
	$c->same( true, $t->quietly( fn () => $lossy->update_session( $sid, $mine, $meta, 'prov', 'mod', 'resp-lost' ), 'a save whose answer is lost' ), 'a save whose answer was lost (with metadata keeping the stored token_id, provider, model, response id): the retry finds its own save, true' );
	$c->same( 2, count( $attempts ), 'the save was sent twice' );
	$c->same( $mine, $read( $t->store, $sid ), 'the transcript is the one saved' );
	$mine[] = contract_envelope( 'text', 'user', 'and the next turn' );
	$c->same( true, $lossy->update_session( $sid, $mine, $meta ), 'the next save goes on from it' );
	$t->record->expect(
		$sid,
		array(
			'transcript'         => contract_wire_messages( $mine ),
			'metadata'           => (object) ( $meta + array( 'token_id' => 9 ) ),
			'providerResponseId' => 'resp-lost',
		)
	);

	// The reviewer's case: the first attempt never arrives; another writer saves the same
	// transcript with its own metadata, provider, model and response id; the retry meets
	// CONFLICT. The session is one version on with this transcript, but not this save.
	$others = array(
		'other metadata, provider, model and response id' => array( array( 'k' => 'from B' ), 'provider-B', 'model-B', 'resp-B' ),
		'the same metadata but another provider'         => array( array( 'k' => 'from A', 'token_id' => 5 ), 'provider-B', 'model-A', 'resp-A' ),
	);
	foreach ( $others as $what => [ $their_meta, $their_provider, $their_model, $their_response ] ) {
		$sid = $t->record->created( 'user:1', $t->store->create_session( $ws, 1, $t->tag . '-lost-meta', array( 'k' => 'v0' ) ) );
		$t->store->update_session( $sid, $base, array( 'k' => 'v0' ) );
		$other    = $t->env->store();
		$same     = $read( $other, $sid );
		$attempts = array();
		$lossy    = new Convograph_Conversation_Store(
			$t->env->url,
			$t->env->token,
			contract_unsent( 'replaceTranscript', $forward, $attempts, static fn () => $other->update_session( $sid, $same, $their_meta, $their_provider, $their_model, $their_response ) )
		);
		$t->fails_once( false, fn () => $lossy->update_session( $sid, $read( $lossy, $sid ), array( 'k' => 'from A', 'token_id' => 5 ), 'provider-A', 'model-A', 'resp-A' ), "a save that never arrived, another writer saving the same transcript with {$what} before the retry", 'the first attempt\'s answer was lost' );
		$stored = $t->store->get_session( $sid ) ?? array();
		$c->same( array( $their_meta, $their_provider, $their_model, $their_response ), array( $stored['metadata'] ?? null, $stored['provider'] ?? null, $stored['model'] ?? null, $stored['provider_response_id'] ?? null ), "the other writer's values are kept ({$what})" );
		$t->record->expect(
			$sid,
			array(
				'metadata' => (object) $their_meta,
				'provider' => $their_provider,
			)
		);
	}

	$sid = $t->record->created( 'user:1', $t->store->create_session( $ws, 1, $t->tag . '-lost-save-2' ) );
	$t->store->update_session( $sid, $base );
	$other    = $t->env->store();
	$theirs   = $read( $other, $sid );
	$theirs[] = contract_envelope( 'text', 'assistant', 'saved between the attempts' );
	$attempts = array();
	$lossy    = new Convograph_Conversation_Store(
		$t->env->url,
		$t->env->token,
		contract_unsent( 'replaceTranscript', $forward, $attempts, static fn () => $other->update_session( $sid, $theirs ) )
	);
	$mine   = $read( $lossy, $sid );
	$mine[] = contract_envelope( 'text', 'assistant', 'not sent, then overtaken' );
	$t->fails_once( false, fn () => $lossy->update_session( $sid, $mine ), 'a save that never reached the server, another saving before the retry', 'the first attempt\'s answer was lost' );
	$c->same( 2, count( $attempts ), 'the save was tried twice' );
	$c->same( $theirs, $read( $t->store, $sid ), 'the turn saved between the attempts is kept' );
	$t->record->expect( $sid, array( 'transcript' => contract_wire_messages( $theirs ) ) );
}

/**
 * A transport whose first request mentioning `$operation` never reaches the server (a reset
 * connection); `$meanwhile` runs in its place. Each such attempt's body is recorded.
 *
 * @param list<string> $attempts
 */
function contract_unsent( string $operation, callable $forward, array &$attempts, callable $meanwhile ): callable {
	return static function ( string $url, array $headers, string $body, float $timeout ) use ( $operation, $forward, &$attempts, $meanwhile ): array {
		if ( ! str_contains( $body, $operation . '(' ) ) {
			return $forward( $url, $headers, $body, $timeout );
		}
		$attempts[] = $body;
		if ( 1 < count( $attempts ) ) {
			return $forward( $url, $headers, $body, $timeout );
		}
		$meanwhile();
		return array(
			'status' => 0,
			'body'   => '',
			'error'  => 'connection reset (request not sent, on purpose)',
		);
	};
}

/**
 * Run CONTRACT_WRITERS writer processes at once; their decoded result lines.
 *
 * @return list<array<string,mixed>>
 */
function contract_run_writers( Contract_Run $t, string $mode, string $sid, int $count, float $lead = 0.5 ): array {
	$start   = microtime( true ) + $lead;
	$spawned = array();
	for ( $w = 0; $w < CONTRACT_WRITERS; $w++ ) {
		$spawned[] = $t->spawn( 'concurrent_writer.php', array( $mode, $sid, (string) $w, (string) $count, sprintf( '%.6F', $start ) ) );
	}
	$results = array();
	foreach ( $spawned as $w => $process ) {
		[ $code, $out, $err ] = Contract_Run::finish( $process );
		$t->c->check( 0 === $code && '' === trim( $err ), "{$mode} writer {$w} exited cleanly, logging nothing", "exit {$code}, stderr: " . trim( $err ) );
		$line      = json_decode( trim( $out ), true );
		$results[] = is_array( $line ) ? $line : array( 'saved' => 0, 'lock_waits' => 0 );
	}
	return $results;
}

/**
 * update_title() between a read and a save: a title whose answer is lost is applied once and
 * the save goes on from it; a title while another writer saves a turn never lets the save
 * drop that turn.
 *
 * @param list<array<string,mixed>> $base
 */
function contract_title_between( Contract_Run $t, array $base ): void {
	$c       = $t->c;
	$ws      = $t->ws;
	$forward = $t->env->transport();
	$read    = static fn ( Convograph_Conversation_Store $store, string $sid ): array => ( $store->get_session_for_owner( $ws, Contract_Run::USER_1, $sid ) ?? array() )['messages'] ?? array();
	$title   = static fn ( string $sid ): ?string => ( $t->store->get_session( $sid ) ?? array() )['title'] ?? null;

	// The reviewer's case: read, title (its answer lost: the request is sent again), save.
	$sid = $t->record->created( 'user:1', $t->store->create_session( $ws, 1, $t->tag . '-title-lost' ) );
	$t->store->update_session( $sid, $base );
	$attempts = array();
	$lossy    = new Convograph_Conversation_Store( $t->env->url, $t->env->token, contract_losing( 'updateConversation', $forward, $attempts ) );
	$mine     = $read( $lossy, $sid );
	$c->same( true, $t->quietly( fn () => $lossy->update_title( $sid, 'titled, answer lost' ), 'a title whose answer is lost' ), 'a title whose answer was lost: true' );
	$c->same( 2, count( $attempts ), 'the title was sent twice' );
	$mine[] = contract_envelope( 'text', 'assistant', 'the turn after the title' );
	$c->same( true, $t->quietly( fn () => $lossy->update_session( $sid, $mine ), 'the save after a title whose answer was lost' ), 'the next save goes on from the title: no concurrent writer is blamed' );
	$c->same( array( $mine, 'titled, answer lost' ), array( $read( $t->store, $sid ), $title( $sid ) ), 'the turn and the title are stored' );
	$t->record->expect(
		$sid,
		array(
			'transcript' => contract_wire_messages( $mine ),
			'title'      => 'titled, answer lost',
		)
	);

	// Another writer saves a turn between this store's read and its save, while its title
	// never arrives the first time (the title already this one, or another): the title is
	// stored, and the save is refused rather than drop that turn.
	foreach ( array( 'another title' => 'an old title', 'the same title' => 'the title' ) as $what => $before ) {
		$sid = $t->record->created( 'user:1', $t->store->create_session( $ws, 1, $t->tag . '-title-race' ) );
		$t->store->update_session( $sid, $base );
		$t->store->update_title( $sid, $before );
		$other    = $t->env->store();
		$theirs   = $read( $other, $sid );
		$theirs[] = contract_envelope( 'text', 'assistant', 'saved while the title was lost' );
		$attempts = array();
		$lossy    = new Convograph_Conversation_Store(
			$t->env->url,
			$t->env->token,
			contract_unsent( 'updateConversation', $forward, $attempts, static fn () => $other->update_session( $sid, $theirs ) )
		);
		$mine   = $read( $lossy, $sid );
		$mine[] = contract_envelope( 'text', 'assistant', 'built on the old transcript' );
		$c->same( true, $t->quietly( fn () => $lossy->update_title( $sid, 'the title' ), "a title that never arrived ({$what} before), another writer saving a turn meanwhile" ), "a title that never arrived ({$what} before), another writer saving a turn meanwhile: true" );
		$t->fails_once( false, fn () => $lossy->update_session( $sid, $mine ), "then the save built on the read before that turn ({$what} before)", 'CONFLICT: a concurrent writer saved' );
		$c->same( array( $theirs, 'the title' ), array( $read( $t->store, $sid ), $title( $sid ) ), "the other writer's turn is kept, and the title is stored ({$what} before)" );
		$t->record->expect(
			$sid,
			array(
				'transcript' => contract_wire_messages( $theirs ),
				'title'      => 'the title',
			)
		);
	}

	// A title after another writer's save (no answer lost): stored, and the save refused.
	$sid = $t->record->created( 'user:1', $t->store->create_session( $ws, 1, $t->tag . '-title-after' ) );
	$t->store->update_session( $sid, $base );
	$one      = $t->env->store();
	$two      = $t->env->store();
	$mine     = $read( $one, $sid );
	$theirs   = $read( $two, $sid );
	$theirs[] = contract_envelope( 'text', 'assistant', 'saved before the title' );
	$two->update_session( $sid, $theirs );
	$c->same( true, $t->quietly( fn () => $one->update_title( $sid, 'after their save' ), 'a title after another writer saved' ), 'a title after another writer saved since this store read: true (a title is not a turn)' );
	$mine[] = contract_envelope( 'text', 'assistant', 'built on the old transcript' );
	$t->fails_once( false, fn () => $one->update_session( $sid, $mine ), 'then the save built on the old read', 'CONFLICT: a concurrent writer saved' );
	$c->same( array( $theirs, 'after their save' ), array( $read( $t->store, $sid ), $title( $sid ) ), "the other writer's turn is kept, and the title is stored" );
	$t->record->expect(
		$sid,
		array(
			'transcript' => contract_wire_messages( $theirs ),
			'title'      => 'after their save',
		)
	);
}
