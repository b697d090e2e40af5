<?php
/**
 * Locks: one holder; contention is null (and not logged); a failure is null too, with a log
 * line that says it is not contention; a stale token releases nothing, even after the lock
 * expired and was taken over (agents-api #470).
 *
 * @package Convograph
 */

declare( strict_types=1 );

function contract_section_locks( Contract_Run $t ): void {
	$c   = $t->c;
	$s   = $t->store;
	$sid = $t->record->created( 'user:1', $s->create_session( $t->ws, 1, $t->tag . '-lock' ) );

	$held = $t->quietly( fn () => $s->acquire_session_lock( $sid, 300 ), 'acquire_session_lock' );
	$c->check( is_string( $held ) && '' !== $held, 'acquire_session_lock returns a token' );
	$c->same( null, $t->quietly( fn () => $s->acquire_session_lock( $sid ), 'a second acquire' ), 'a second holder gets null (contention is not logged)' );
	$c->same( false, $t->quietly( fn () => $s->release_session_lock( $sid, 'not-the-token' ), 'release with a wrong token' ), 'a wrong token releases nothing' );
	$c->same( null, $s->acquire_session_lock( $sid ), 'the lock is still held' );
	$c->same( true, $s->release_session_lock( $sid, (string) $held ), 'the holder releases it' );
	$c->same( false, $s->release_session_lock( $sid, (string) $held ), 'releasing twice: false' );

	// Expiry: A stalls past its TTL, B takes the lock over, A's late release leaves B's lock.
	$a = $s->acquire_session_lock( $sid, 1 );
	$c->check( is_string( $a ), 'worker A locks for 1 s' );
	$c->same( null, $s->acquire_session_lock( $sid, 60 ), 'worker B must wait' );
	usleep( 1300000 );
	$b = $s->acquire_session_lock( $sid, 60 );
	$c->check( is_string( $b ) && $b !== $a, 'after the TTL worker B takes the lock over' );
	$c->same( false, $s->release_session_lock( $sid, (string) $a ), 'A\'s stale token releases nothing' );
	$c->same( null, $s->acquire_session_lock( $sid ), 'B still holds the lock' );
	$c->same( true, $s->release_session_lock( $sid, (string) $b ), 'B releases it' );

	// TTLs outside convograph's 1..86400 are clamped, not refused.
	$short = $t->quietly( fn () => $s->acquire_session_lock( $sid, 0 ), 'acquire with TTL 0' );
	$c->check( is_string( $short ), 'TTL 0 counts as 1 s (as the bundled store)' );
	$c->same( true, $s->release_session_lock( $sid, (string) $short ), 'released' );
	$long = $t->quietly( fn () => $s->acquire_session_lock( $sid, 10 ** 9 ), 'acquire with TTL 10^9' );
	$c->check( is_string( $long ), 'a TTL above a day counts as a day' );
	$c->same( true, $s->release_session_lock( $sid, (string) $long ), 'released' );

	$missing = '00000000-0000-4000-8000-000000000001';
	$t->fails_once( null, fn () => $s->acquire_session_lock( $missing ), 'acquire_session_lock(unknown id)', 'NOT_FOUND' );
	$t->fails_once( null, fn () => $s->acquire_session_lock( $missing ), 'acquire_session_lock(unknown id) again', 'null, not contention: no lock was taken' );
	$t->fails_once( false, fn () => $s->release_session_lock( $missing, 'x' ), 'release_session_lock(unknown id)', 'NOT_FOUND' );
}
