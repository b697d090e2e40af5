<?php
/**
 * The WordPress store and lock contract, run against a live convograph server.
 *
 *     CONVOGRAPH_URL=http://127.0.0.1:8000/graphql CONVOGRAPH_TOKEN=cvg_… \
 *     CONVOGRAPH_WORKSPACE=site:42 php adapters/wordpress/tests/store_contract.php
 *
 * (tests/lib/environment.php lists every variable; tests/test_adapter_wordpress.py sets
 * them.) Plain PHP: one line per check, a summary, exit 0 only when every check passed.
 *
 * @package Convograph
 */

declare( strict_types=1 );

use AgentsAPI\Core\Workspace\WP_Agent_Workspace_Scope;

require_once __DIR__ . '/lib/checks.php';
require_once __DIR__ . '/lib/environment.php';
require_once __DIR__ . '/lib/fixtures.php';
require_once __DIR__ . '/lib/run.php';
require_once __DIR__ . '/sections/shape.php';
require_once __DIR__ . '/sections/owners.php';
require_once __DIR__ . '/sections/lists.php';
require_once __DIR__ . '/sections/updates.php';
require_once __DIR__ . '/sections/pending.php';
require_once __DIR__ . '/sections/locks.php';
require_once __DIR__ . '/sections/concurrency.php';
require_once __DIR__ . '/sections/bad-input.php';
require_once __DIR__ . '/sections/requests.php';
require_once __DIR__ . '/sections/unreachable.php';
require_once __DIR__ . '/sections/answers.php';
require_once __DIR__ . '/sections/malformed.php';
require_once __DIR__ . '/sections/refusals.php';
require_once __DIR__ . '/sections/wordpress.php';

/** @return int The exit code. */
function contract_main(): int {
	try {
		$env = Contract_Environment::from_env();
	} catch ( RuntimeException $e ) {
		fwrite( STDERR, 'store_contract.php: ' . $e->getMessage() . "\n" );
		return 2;
	}
	$checks = new Contract_Checks();
	$log    = new Contract_Log();
	$run    = new Contract_Run( $checks, $env, $log, new Contract_Record(), $env->store(), $env->scope(), 'wp' . bin2hex( random_bytes( 4 ) ) );
	fwrite( STDOUT, 'convograph WordPress store contract: ' . $env->url . ', workspace ' . $env->workspace . ', '
		. ( $env->emulated() ? 'pre-SERVICE mode (owners emulated with their own WRITE tokens)' : 'SERVICE mode (one token, Convograph-Owner header)' ) . "\n" );

	$started  = microtime( true );
	$sections = array(
		'interfaces and workspace scope'          => 'contract_section_shape',
		'two owners through one token; row shape' => 'contract_section_owners',
		'list_sessions: filters, limit, offset'   => 'contract_section_lists',
		'update_session, update_title, delete'    => 'contract_section_updates',
		'get_recent_pending_session dedup'        => 'contract_section_pending',
		'locks'                                   => 'contract_section_locks',
		'concurrent writers (separate processes)' => 'contract_section_concurrency',
		'bad input: invalid UTF-8, owners, workspace' => 'contract_section_bad_input',
		'requests as sent; retries; transports'   => 'contract_section_requests',
		'server down, silent or trickling'        => 'contract_section_unreachable',
		'streams: answers of every shape and size' => 'contract_section_answers',
		'answers without the field asked for'     => 'contract_section_malformed',
		'refusals: revoked token, 413, non-SERVICE token' => 'contract_section_refusals',
		'WordPress bootstrap and wp_remote_post'  => 'contract_section_wordpress',
	);
	$timings = array();
	foreach ( $sections as $name => $section ) {
		$checks->section( $name );
		$began = microtime( true );
		try {
			$section( $run );
		} catch ( Throwable $e ) {
			$checks->crashed( $e );
		}
		$timings[ $name ] = round( microtime( true ) - $began, 2 );
		fwrite( STDOUT, sprintf( "  (%.2f s)\n", $timings[ $name ] ) );
	}

	$checks->section( 'logs' );
	$leaks = array_filter( $log->lines(), static fn ( string $line ): bool => array() !== array_filter( $env->secrets(), static fn ( string $s ): bool => str_contains( $line, $s ) ) );
	$checks->same( array(), array_values( $leaks ), 'no log line holds a token (' . count( $log->lines() ) . ' lines written)' );
	$checks->check( array() === array_filter( $log->lines(), static fn ( string $l ): bool => ! str_contains( $l, 'convograph: Convograph_Conversation_Store::' ) ), 'every log line is the store\'s own one-line format' );

	if ( null !== $env->result_file ) {
		$report = array(
			'mode'      => $env->emulated() ? 'emulated' : 'service',
			'workspace' => $env->workspace,
			'tag'       => $run->tag,
			'sessions'  => $run->record->sessions,
			'deleted'   => $run->record->deleted,
			'expect'    => (object) $run->record->expect,
			'passed'    => $checks->count_passed(),
			'failed'    => $checks->failures(),
			'seconds'   => round( microtime( true ) - $started, 2 ),
			'timings'   => $timings,
		);
		file_put_contents( $env->result_file, json_encode( $report, JSON_PRESERVE_ZERO_FRACTION | JSON_UNESCAPED_SLASHES | JSON_PRETTY_PRINT | JSON_THROW_ON_ERROR ) );
	}

	$failures = $checks->failures();
	fwrite( STDOUT, sprintf( "\n%d checks passed, %d failed, %.1f s\n", $checks->count_passed(), count( $failures ), microtime( true ) - $started ) );
	if ( array() !== $failures ) {
		fwrite( STDERR, "store_contract.php: FAILED checks:\n  " . implode( "\n  ", $failures ) . "\n" );
		return 1;
	}
	return 0;
}

exit( contract_main() );
