<?php
/**
 * A minimal check recorder for the plain-PHP contract program: every check prints one line,
 * a failed one says what was expected and what came; the program's exit code is the verdict.
 *
 * @package Convograph
 */

declare( strict_types=1 );

final class Contract_Checks {

	private int $passed = 0;

	/** @var list<string> */
	private array $failed = array();

	private string $section = '';

	public function section( string $name ): void {
		$this->section = $name;
		fwrite( STDOUT, "\n== {$name}\n" );
	}

	public function check( bool $ok, string $what, string $detail = '' ): bool {
		if ( $ok ) {
			++$this->passed;
			fwrite( STDOUT, "  ok    {$what}\n" );
			return true;
		}
		$line           = "[{$this->section}] {$what}" . ( '' !== $detail ? " -- {$detail}" : '' );
		$this->failed[] = $line;
		fwrite( STDOUT, "  FAIL  {$what}" . ( '' !== $detail ? "\n        {$detail}" : '' ) . "\n" );
		return false;
	}

	/** Strict equality (===), with both values shown on failure. */
	public function same( mixed $expected, mixed $actual, string $what ): bool {
		return $this->check(
			$expected === $actual,
			$what,
			'expected ' . self::show( $expected ) . ', got ' . self::show( $actual )
		);
	}

	/** A section's code threw: that is a failure of the section, and the run goes on. */
	public function crashed( Throwable $e ): void {
		$this->check( false, 'section ran to the end', get_class( $e ) . ': ' . $e->getMessage() . ' at ' . basename( $e->getFile() ) . ':' . $e->getLine() );
	}

	public function count_passed(): int {
		return $this->passed;
	}

	/** @return list<string> */
	public function failures(): array {
		return $this->failed;
	}

	public static function show( mixed $value ): string {
		$text = json_encode( $value, JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_PRESERVE_ZERO_FRACTION | JSON_INVALID_UTF8_SUBSTITUTE | JSON_PARTIAL_OUTPUT_ON_ERROR );
		$text = false === $text ? var_export( $value, true ) : $text;
		return strlen( $text ) > 600 ? substr( $text, 0, 600 ) . '…' : $text;
	}
}
