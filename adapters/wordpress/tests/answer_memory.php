<?php
/**
 * Read one answer through a transport and say what it cost in memory, for the contract's
 * check that the streams transport holds a large answer about once (its own PHP process, so
 * that it can run under a memory_limit of its own, and a fatal error there is seen as one).
 *
 *   php -d memory_limit=64M answer_memory.php URL TRANSPORT
 *
 * Prints one JSON line: the answer's status, its body's length and error, and the peak memory
 * the call added.
 *
 * @package Convograph
 */

declare( strict_types=1 );

require_once dirname( __DIR__ ) . '/src/class-convograph-http.php';

[ , $url, $transport ] = $argv;
memory_reset_peak_usage();
$before = memory_get_usage();
$answer = Convograph_Http::$transport( $url, array( 'Content-Type' => 'application/json' ), '{"query":"{x}"}', 20.0 );
echo json_encode(
	array(
		'status' => $answer['status'],
		'bytes'  => strlen( $answer['body'] ),
		'error'  => $answer['error'] ?? null,
		'peak'   => memory_get_peak_usage() - $before,
	)
), "\n";
