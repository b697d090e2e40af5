<?php
/**
 * list_sessions: newest first, agent_slug / context filters ('' = none), limit (default 50,
 * at least 1, beyond one convograph page), offset (paged through), include_messages.
 *
 * @package Convograph
 */

declare( strict_types=1 );

function contract_section_lists( Contract_Run $t ): void {
	$c       = $t->c;
	$s       = $t->store;
	$ws      = $t->ws;
	$support = $t->tag . '-support';
	$sales   = $t->tag . '-sales';

	$support_ids = array();
	for ( $i = 0; $i < 5; $i++ ) {
		$support_ids[] = $t->record->created( 'user:1', $s->create_session( $ws, 1, $support, array( 'i' => $i ), 'chat' ) );
	}
	$sales_ids = array();
	for ( $i = 0; $i < 2; $i++ ) {
		$sales_ids[] = $t->record->created( 'user:1', $s->create_session( $ws, 1, $sales, array( 'i' => $i ), 'rest' ) );
	}
	$newest = array_reverse( $support_ids );
	$list   = static fn ( array $args ): array => contract_ids( $s->list_sessions( $ws, 1, $args ) );

	$c->same( $newest, $list( array( 'agent_slug' => $support ) ), 'agent_slug filter, newest first' );
	$c->same( array_slice( $newest, 0, 2 ), $list( array( 'agent_slug' => $support, 'limit' => 2 ) ), 'limit 2' );
	$c->same( array_slice( $newest, 2, 2 ), $list( array( 'agent_slug' => $support, 'limit' => 2, 'offset' => 2 ) ), 'limit 2, offset 2' );
	$c->same( array_slice( $newest, 4 ), $list( array( 'agent_slug' => $support, 'limit' => 10, 'offset' => 4 ) ), 'offset 4: the last one' );
	$c->same( array(), $list( array( 'agent_slug' => $support, 'offset' => 5 ) ), 'offset at the end: nothing' );
	$c->same( array(), $list( array( 'agent_slug' => $support, 'offset' => 500 ) ), 'offset past the end: nothing' );
	$c->same( array_slice( $newest, 0, 1 ), $list( array( 'agent_slug' => $support, 'limit' => 0 ) ), 'limit 0 counts as 1 (as the bundled store)' );
	$c->same( $newest, $list( array( 'agent_slug' => $support, 'offset' => -3 ) ), 'a negative offset counts as 0' );
	$c->same( array_slice( $newest, 1, 2 ), $list( array( 'agent_slug' => $support, 'limit' => '2', 'offset' => '1' ) ), 'numeric strings are accepted' );

	$c->same( array_reverse( $sales_ids ), $list( array( 'agent_slug' => $sales, 'context' => 'rest' ) ), 'agent_slug and context together' );
	$c->same( array(), $list( array( 'agent_slug' => $support, 'context' => 'rest' ) ), 'a context none of them has' );
	$rest = $list( array( 'context' => 'rest', 'limit' => 1000 ) );
	$c->check( array() === array_diff( $sales_ids, $rest ) && array() === array_intersect( $support_ids, $rest ), 'context filter alone' );
	$everything = $list( array( 'agent_slug' => '', 'context' => '', 'limit' => 1000 ) );
	$c->check( array() === array_diff( array_merge( $support_ids, $sales_ids ), $everything ), "agent_slug '' and context '' filter nothing (as the bundled store)" );

	// Messages only when asked for.
	$turns = contract_turns( 'listed', 2 );
	$c->same( true, $s->update_session( $support_ids[0], $turns ), 'update_session(oldest support session)' );
	$t->record->expect( $support_ids[0], array( 'transcript' => contract_wire_messages( $turns ) ) );
	$plain = $s->list_sessions( $ws, 1, array( 'agent_slug' => $support ) );
	$c->check( array() === array_filter( $plain, static fn ( array $r ): bool => array_key_exists( 'messages', $r ) ), 'include_messages absent: rows have no messages key' );
	$plain = $s->list_sessions( $ws, 1, array( 'agent_slug' => $support, 'include_messages' => false ) );
	$c->check( array() === array_filter( $plain, static fn ( array $r ): bool => array_key_exists( 'messages', $r ) ), 'include_messages false: rows have no messages key' );
	$full = $s->list_sessions( $ws, 1, array( 'agent_slug' => $support, 'include_messages' => true ) );
	$c->same( array( array(), array(), array(), array(), $turns ), array_column( $full, 'messages' ), 'include_messages true: each row\'s complete transcript' );

	// More sessions than one convograph page (100), through the owner methods.
	$bulk     = $t->tag . '-bulk';
	$bulk_ids = array();
	for ( $i = 0; $i < 105; $i++ ) {
		$bulk_ids[] = $t->record->created( 'user:2', $s->create_session_for_owner( $ws, Contract_Run::USER_2, $bulk, array(), 'import' ) );
	}
	$c->same( 105, count( array_filter( $bulk_ids ) ), '105 sessions created for user 2' );
	$newest = array_reverse( $bulk_ids );
	$owned  = static fn ( array $args ): array => contract_ids( $s->list_sessions_for_owner( $ws, Contract_Run::USER_2, $args + array( 'agent_slug' => $bulk ) ) );
	$c->same( array_slice( $newest, 0, 50 ), $owned( array() ), 'no limit: the 50 newest' );
	$c->same( $newest, $owned( array( 'limit' => 105 ) ), 'limit 105: all, across two pages, in order' );
	$c->same( $newest, $owned( array( 'limit' => 1000 ) ), 'limit 1000: all 105' );
	$c->same( array_slice( $newest, 98, 4 ), $owned( array( 'limit' => 4, 'offset' => 98 ) ), 'offset 98, limit 4: across the page boundary' );
	$c->same( array_slice( $newest, 100, 10 ), $owned( array( 'limit' => 10, 'offset' => 100 ) ), 'offset 100: the last 5' );
	$c->same( array_slice( $newest, 3, 101 ), $owned( array( 'limit' => 101, 'offset' => 3 ) ), 'offset 3, limit 101' );
	$c->same( array(), $owned( array( 'offset' => 105 ) ), 'offset 105: nothing' );
	$c->same( array_slice( $newest, 0, 5 ), contract_ids( $s->list_sessions( $ws, 2, array( 'agent_slug' => $bulk, 'context' => 'import', 'limit' => 5 ) ) ), 'the int-user method lists the same owner' );
}
