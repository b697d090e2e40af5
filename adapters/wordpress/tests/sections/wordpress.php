<?php
/**
 * The plugin bootstrap under a minimal WordPress, with and without Agents API's contracts
 * loaded first (each in a process of its own: it defines WordPress's global functions).
 *
 * @package Convograph
 */

declare( strict_types=1 );

function contract_section_wordpress( Contract_Run $t ): void {
	foreach ( array( array(), array( '--with-agents-api' ) ) as $args ) {
		[ $code, $out, $err ] = Contract_Run::finish( $t->spawn( 'wordpress_bootstrap_check.php', $args ) );
		$lines                = array_values( array_filter( explode( "\n", $out ) ) );
		$summary              = json_decode( (string) array_pop( $lines ), true );
		fwrite( STDOUT, '  | ' . implode( "\n  | ", $lines ) . "\n" );
		$label = array() === $args ? 'without Agents API' : 'with Agents API loaded first';
		$t->c->check( 0 === $code && '' === trim( $err ) && is_array( $summary ), "bootstrap check ({$label}) ran cleanly", "exit {$code}, stderr: " . trim( $err ) );
		$summary = is_array( $summary ) ? $summary : array( 'passed' => 0, 'failed' => array( 'no summary' ), 'deleted' => array() );
		$t->c->same( array(), $summary['failed'], "bootstrap check ({$label}): its {$summary['passed']} checks passed" );
		$t->c->check( $summary['passed'] >= 10, "bootstrap check ({$label}) checked something", "{$summary['passed']} checks" );
		foreach ( $summary['deleted'] as $id ) {
			$t->record->deleted( (string) $id );
		}
	}
}
