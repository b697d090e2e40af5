<?php
/**
 * The server down (nothing listens), silent (it accepts and never answers) or trickling (its
 * answer comes a byte at a time): every method returns its failure value, logs one line and
 * returns before its timeout, with every transport. A trickled answer that ends in time is
 * read whole.
 *
 * @package Convograph
 */

declare( strict_types=1 );

/** Seconds a method may overrun its timeout (process scheduling, not waiting). */
const CONTRACT_SLACK = 0.5;

function contract_section_unreachable( Contract_Run $t ): void {
	$c       = $t->c;
	$ws      = $t->ws;
	$sid     = '00000000-0000-4000-8000-000000000002';
	$timeout = 2.0;

	$down = 'http://127.0.0.1:' . contract_closed_port() . '/graphql';
	foreach ( array( 'curl', 'streams' ) as $transport ) {
		$store = new Convograph_Conversation_Store( $down, $t->env->token, Convograph_Http::$transport( ... ) );
		$store->set_timeout( $timeout );
		foreach ( contract_every_method( $store, $ws, $sid ) as $name => [ $failure, $call ] ) {
			$started = microtime( true );
			$t->fails_once( $failure, $call, "server down ({$transport}): {$name}", 'no response' );
			$took = microtime( true ) - $started;
			$c->check( $took < $timeout + CONTRACT_SLACK, sprintf( 'server down (%s): %s gave up by its %.1f s timeout (took %.3f s)', $transport, $name, $timeout, $took ) );
		}
	}

	// A server that accepts the connection and then says nothing.
	$silent = stream_socket_server( 'tcp://127.0.0.1:0' );
	if ( false === $silent ) {
		$c->check( false, 'a silent server can listen', 'stream_socket_server failed' );
		return;
	}
	$url     = 'http://' . stream_socket_get_name( $silent, false ) . '/graphql';
	$timeout = 0.5;
	foreach ( array( 'curl', 'streams' ) as $transport ) {
		$store = new Convograph_Conversation_Store( $url, $t->env->token, Convograph_Http::$transport( ... ) );
		$store->set_timeout( $timeout );
		// A workspace call then a retried write, a read then a retried write, a retried lock.
		$calls = array_intersect_key( contract_every_method( $store, $ws, $sid ), array_flip( array( 'create_session', 'update_session', 'acquire_session_lock' ) ) );
		foreach ( $calls as $name => [ $failure, $call ] ) {
			$started = microtime( true );
			$t->fails_once( $failure, $call, "silent server ({$transport}): {$name}" );
			$took = microtime( true ) - $started;
			$c->check( $took < $timeout + CONTRACT_SLACK, sprintf( 'silent server (%s): %s gave up by its %.1f s timeout (took %.3f s)', $transport, $name, $timeout, $took ) );
		}
	}
	fclose( $silent );

	contract_trickling( $t );
}

/**
 * A server that sends its answer (headers too) one byte at a time (tests/trickle_server.php).
 */
function contract_trickling( Contract_Run $t ): void {
	$c   = $t->c;
	$sid = '00000000-0000-4000-8000-000000000003';
	foreach ( array( 'curl', 'streams' ) as $transport ) {
		// A byte every 50 ms: the ~230 bytes would take 12 s. The call's 1 s bounds it all.
		$timeout = 1.0;
		[ $row, $lines, $took ] = contract_trickled( $t, $transport, '0.05', '', $timeout, $sid );
		$c->same( null, $row, "trickling server ({$transport}): get_session's failure value" );
		$c->check( 1 === count( $lines ) && str_contains( $lines[0], 'timed out' ), "trickling server ({$transport}): one log line saying 'timed out'", 'logged: ' . Contract_Checks::show( $lines ) );
		$c->check( $took < $timeout + CONTRACT_SLACK, sprintf( 'trickling server (%s): get_session gave up by its %.1f s timeout (took %.3f s)', $transport, $timeout, $took ) );

		// A byte every millisecond ends in well under the 3 s: read whole (chunk-encoded too, for
		// the streams transport, which decodes it itself).
		$modes = array( 'with a Content-Length' => '' ) + ( 'streams' === $transport ? array( 'chunked' => 'chunked' ) : array() );
		foreach ( $modes as $name => $mode ) {
			[ $row, $lines ] = contract_trickled( $t, $transport, '0.001', $mode, 3.0, $sid );
			$c->same( array( 'trickled', array( 'via' => 'trickle' ) ), array( $row['title'] ?? null, $row['metadata'] ?? null ), "a trickled answer {$name} that ends in time ({$transport}): read whole" );
			$c->same( array(), $lines, "a trickled answer {$name} that ends in time ({$transport}): nothing logged" );
		}
	}
}

/**
 * get_session through `$transport` from a trickle server: the row, the log lines, the seconds.
 *
 * @return array{0:array<string,mixed>|null,1:list<string>,2:float}
 */
function contract_trickled( Contract_Run $t, string $transport, string $gap, string $mode, float $timeout, string $sid ): array {
	$server = $t->spawn( 'trickle_server.php', array( $gap, '2', $mode ) ); // The retry's connection too.
	$port   = (int) trim( (string) fgets( $server[1][1] ) );
	$store  = new Convograph_Conversation_Store( "http://127.0.0.1:{$port}/graphql", $t->env->token, Convograph_Http::$transport( ... ) );
	$store->set_timeout( $timeout );
	$started        = microtime( true );
	[ $row, $lines ] = $t->log->during( fn () => $store->get_session( $sid ) );
	$took           = microtime( true ) - $started;
	proc_terminate( $server[0] ); // It would wait for the retry that did not come.
	Contract_Run::finish( $server );
	return array( $row, $lines, $took );
}

/**
 * Every store method with its failure value, as calls to make.
 *
 * @return array<string,array{0:mixed,1:callable}>
 */
function contract_every_method( Convograph_Conversation_Store $s, AgentsAPI\Core\Workspace\WP_Agent_Workspace_Scope $ws, string $sid ): array {
	$owner = Contract_Run::USER_1;
	return array(
		'create_session'                       => array( '', fn () => $s->create_session( $ws, 1, 'x' ) ),
		'list_sessions'                        => array( array(), fn () => $s->list_sessions( $ws, 1 ) ),
		'get_session'                          => array( null, fn () => $s->get_session( $sid ) ),
		'update_session'                       => array( false, fn () => $s->update_session( $sid, contract_turns( 'x', 1 ) ) ),
		'delete_session'                       => array( false, fn () => $s->delete_session( $sid ) ),
		'get_recent_pending_session'           => array( null, fn () => $s->get_recent_pending_session( $ws, 1 ) ),
		'update_title'                         => array( false, fn () => $s->update_title( $sid, 'x' ) ),
		'create_session_for_owner'             => array( '', fn () => $s->create_session_for_owner( $ws, $owner ) ),
		'list_sessions_for_owner'              => array( array(), fn () => $s->list_sessions_for_owner( $ws, $owner ) ),
		'get_recent_pending_session_for_owner' => array( null, fn () => $s->get_recent_pending_session_for_owner( $ws, $owner ) ),
		'get_session_for_owner'                => array( null, fn () => $s->get_session_for_owner( $ws, $owner, $sid ) ),
		'acquire_session_lock'                 => array( null, fn () => $s->acquire_session_lock( $sid ) ),
		'release_session_lock'                 => array( false, fn () => $s->release_session_lock( $sid, 'x' ) ),
	);
}
