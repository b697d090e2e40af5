<?php
/**
 * Writers in separate PHP processes on one session: unlocked full-transcript writers end with
 * one writer's complete transcript (never a mix); writers that take the lock lose no turn.
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
}

/**
 * Run CONTRACT_WRITERS writer processes at once; their decoded result lines.
 *
 * @return list<array<string,mixed>>
 */
function contract_run_writers( Contract_Run $t, string $mode, string $sid, int $count ): array {
	$start   = microtime( true ) + 0.5;
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
