<?php
/**
 * The streams transport reads every shape of HTTP/1.1 answer a server may send, as soon as it
 * is complete (tests/crafted_server.php keeps each connection open after its answer), and a
 * large one in time linear in its size.
 *
 * @package Convograph
 */

declare( strict_types=1 );

function contract_section_answers( Contract_Run $t ): void {
	$c       = $t->c;
	$server  = $t->spawn( 'crafted_server.php', array() );
	$base    = 'http://127.0.0.1:' . (int) trim( (string) fgets( $server[1][1] ) );
	$timeout = 2.0;
	try {
		// Each of these waited for the timeout before (the answer's end was not seen).
		$shapes = array(
			'length-repeated' => array( 200, 'Content-Length: N, N (one length, repeated)' ),
			'length-twice'    => array( 200, 'Content-Length twice, the same' ),
			'lf-only'         => array( 200, 'lines ending in LF alone' ),
			'lf-only-chunked' => array( 200, 'lines ending in LF alone, chunk-encoded' ),
			'no-content'      => array( 204, 'a 204 without a length' ),
			'not-modified'    => array( 304, 'a 304 with the length a 200 would have' ),
			'interim'         => array( 200, '100 Continue and 103 Early Hints first' ),
			'chunk-trailer'   => array( 200, 'chunk extensions and a trailer' ),
		);
		foreach ( $shapes as $shape => [ $status, $what ] ) {
			$started = microtime( true );
			$answer  = Convograph_Http::streams( "{$base}/{$shape}/graphql", array( 'Content-Type' => 'application/json' ), '{"query":"{x}"}', $timeout );
			$took    = microtime( true ) - $started;
			$title   = 200 === $status ? ( json_decode( $answer['body'], true )['data']['conversation']['title'] ?? null ) : '';
			$c->same( array( $status, 200 === $status ? 'crafted' : '' ), array( $answer['status'], 200 === $status ? $title : $answer['body'] ), "streams: {$what}: status and body (" . ( $answer['error'] ?? 'no error' ) . ')' );
			$c->check( $took < $timeout / 2, sprintf( 'streams: %s: read when complete, the connection still open (%.3f s of %.1f s)', $what, $took, $timeout ) );
		}

		// A 20 MB session (200 messages of 100 KB, within convograph's limits): the streams
		// transport took over 10 s and gave up, copying all it had received after every read.
		$budget = 4.0;
		foreach ( array( 'curl', 'streams' ) as $transport ) {
			foreach ( array( 'big-length' => 'with a Content-Length', 'big-chunked' => 'chunk-encoded' ) as $shape => $what ) {
				$store = new Convograph_Conversation_Store( "{$base}/{$shape}/200/100000/graphql", $t->env->token, Convograph_Http::$transport( ... ) );
				$store->set_timeout( $budget );
				$started         = microtime( true );
				[ $row, $lines ] = $t->log->during( fn () => $store->get_session( '00000000-0000-4000-8000-00000000000b' ) );
				$took            = microtime( true ) - $started;
				$messages        = is_array( $row['messages'] ?? null ) ? $row['messages'] : array();
				$c->check(
					200 === count( $messages ) && array() === array_filter( $messages, static fn ( $m ): bool => 100000 !== strlen( (string) ( $m['content'] ?? '' ) ) ),
					"{$transport}: a 20 MB answer {$what}: get_session returns its 200 messages of 100 KB",
					'got ' . count( $messages ) . ' messages; logged: ' . Contract_Checks::show( $lines )
				);
				$c->check( $took < $budget, sprintf( '%s: a 20 MB answer %s: read within the %.1f s timeout (took %.3f s)', $transport, $what, $budget, $took ) );
			}
		}
	} finally {
		proc_terminate( $server[0] );
		Contract_Run::finish( $server );
	}
}
