<?php
/**
 * Everything a contract section works with.
 *
 * @package Convograph
 */

declare( strict_types=1 );

use AgentsAPI\Core\Workspace\WP_Agent_Workspace_Scope;

final class Contract_Run {

	public const USER_1 = array(
		'type' => 'user',
		'key'  => '1',
	);

	public const USER_2 = array(
		'type' => 'user',
		'key'  => '2',
	);

	/**
	 * @param string $tag Unique to this run: agent slugs and contexts carry it, so that a
	 *                    database used before does not disturb the checks.
	 */
	public function __construct(
		public readonly Contract_Checks $c,
		public readonly Contract_Environment $env,
		public readonly Contract_Log $log,
		public readonly Contract_Record $record,
		public readonly Convograph_Conversation_Store $store,
		public readonly WP_Agent_Workspace_Scope $ws,
		public readonly string $tag,
	) {}

	/** Check that `$call` returned `$expected` and wrote exactly one log line (mentioning `$why`). */
	public function fails_once( mixed $expected, callable $call, string $what, string $why = '' ): void {
		[ $result, $lines ] = $this->log->during( $call );
		$this->c->same( $expected, $result, "{$what}: failure value" );
		$this->c->check(
			1 === count( $lines ) && str_contains( $lines[0] ?? '', $why ),
			"{$what}: one log line" . ( '' !== $why ? " saying '{$why}'" : '' ),
			'logged: ' . Contract_Checks::show( $lines )
		);
	}

	/** Run `$call`, check it logged nothing, return its result. */
	public function quietly( callable $call, string $what ): mixed {
		[ $result, $lines ] = $this->log->during( $call );
		$this->c->same( array(), $lines, "{$what}: nothing logged" );
		return $result;
	}

	/**
	 * Start `php [OPTIONS] tests/<script> ARGS` with this run's environment; its process and
	 * pipes. OPTIONS are php's own (`-d memory_limit=64M`).
	 *
	 * @param list<string> $args
	 * @param list<string> $php_options
	 * @return array{0:resource,1:array<int,resource>}
	 */
	public function spawn( string $script, array $args, array $php_options = array() ): array {
		$process = proc_open(
			array_merge( array( PHP_BINARY ), $php_options, array( dirname( __DIR__ ) . '/' . $script ), $args ),
			array(
				0 => array( 'pipe', 'r' ),
				1 => array( 'pipe', 'w' ),
				2 => array( 'pipe', 'w' ),
			),
			$pipes
		);
		if ( ! is_resource( $process ) ) {
			throw new RuntimeException( "cannot start {$script}" );
		}
		fclose( $pipes[0] );
		return array( $process, $pipes );
	}

	/**
	 * Wait for a spawned process: exit code, stdout, stderr.
	 *
	 * @param array{0:resource,1:array<int,resource>} $spawned
	 * @return array{0:int,1:string,2:string}
	 */
	public static function finish( array $spawned ): array {
		[ $process, $pipes ] = $spawned;
		$out                 = (string) stream_get_contents( $pipes[1] );
		$err                 = (string) stream_get_contents( $pipes[2] );
		fclose( $pipes[1] );
		fclose( $pipes[2] );
		return array( proc_close( $process ), $out, $err );
	}
}
