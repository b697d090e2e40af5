<?php
/**
 * An HTTP/1.1 answer read as its bytes arrive, for the streams transport (Convograph_Http).
 *
 * The status line and headers are parsed once, when their blank line has come; the body is
 * then read as it comes, in time linear in its size: counted against its Content-Length,
 * decoded chunk by chunk (a state machine over the new bytes only), or kept until the
 * connection closes. The body is one string, each read's bytes appended to it in place (PHP
 * grows a string only this object holds where it lies, when it can, rather than copy it), so
 * the answer is held about once: a list of the reads' pieces, joined at the end, held it
 * about 2.5 times (each 8 KB piece in a 12 KB block, then the join), and a 30 MB answer
 * exhausted a memory_limit of 64M that curl's reading of it fits in. Nothing copies the body
 * already read: a chunk's data is appended straight from the read, and only an incomplete
 * chunk-size or trailer line is kept over for the next read.
 *
 * Lenient where servers differ and no meaning is lost: lines may end in LF alone, a repeated
 * Content-Length (`20, 20`, or the header twice) is one length, interim 1xx answers are
 * skipped, and 204 and 304 answers have no body whatever their headers say (a server may keep
 * the connection open after them).
 *
 * @package Convograph
 */

declare( strict_types=1 );

final class Convograph_Http_Answer {

	/** The headers of one answer (curl allows 100 KiB per header). */
	private const MAX_HEAD_BYTES = 262144;

	/** A chunk-size line, or a trailer line. */
	private const MAX_LINE_BYTES = 8192;

	/** What is being read: the headers, the body (by `$framing`), or nothing more. */
	private string $state = 'head';

	/** How the body ends: 'length', 'chunked' or 'close'. */
	private string $framing = '';

	/** Chunked: where in the body the reader is ('size', 'data', 'data-end', 'trailer'). */
	private string $chunk_state = 'size';

	/** The headers so far (state 'head'); a line not yet complete (chunked). */
	private string $pending = '';

	/** Bytes still to come: of the body ('length'), of the current chunk ('chunked'). */
	private int $left = 0;

	/** The announced length ('length'), for the error when the connection ends early. */
	private int $length = 0;

	private int $status = 0;

	/**
	 * The answer's headers: lower-case name => value (a header given twice, its values joined
	 * with ", ").
	 *
	 * @var array<string,string>
	 */
	private array $headers = array();

	/** The body so far (appended to in place: never copy it while it grows). */
	private string $body = '';

	private int $received = 0;

	private ?string $error = null;

	/** Every byte received so far, headers included. */
	public function received(): int {
		return $this->received;
	}

	/** True once the answer is complete, or cannot be read. */
	public function done(): bool {
		return 'done' === $this->state;
	}

	/** Take the next bytes of the connection; after done(), they are ignored. */
	public function feed( string $bytes ): void {
		$this->received += strlen( $bytes );
		$this->take( $bytes );
	}

	private function take( string $bytes ): void {
		if ( 'head' === $this->state ) {
			$this->feed_head( $bytes );
		} elseif ( 'body' === $this->state ) {
			$this->feed_body( $bytes );
		}
	}

	/**
	 * The answer, once done(); or, when the connection has ended before (`$closed`), the
	 * answer if it ends with the connection, else why it is none.
	 *
	 * @return array{status:int,body:string,error?:string,headers?:array<string,string>}
	 */
	public function result( bool $closed = false ): array {
		if ( ! $this->done() ) {
			if ( ! $closed ) {
				return self::failure( 'the answer is not complete' );
			}
			if ( 'head' === $this->state ) {
				return self::failure( 0 === $this->received ? 'the connection closed without an answer' : 'the connection closed inside the answer\'s headers' );
			}
			if ( 'length' === $this->framing ) {
				return self::failure( 'the connection closed after ' . ( $this->length - $this->left ) . ' of the answer\'s ' . $this->length . ' bytes' );
			}
			if ( 'chunked' === $this->framing ) {
				return self::failure( 'the connection closed inside the answer\'s body' );
			}
			$this->state = 'done'; // No length: the answer ends with the connection.
		}
		if ( null !== $this->error ) {
			return self::failure( $this->error );
		}
		return array(
			'status'  => $this->status,
			'body'    => $this->body,
			'headers' => $this->headers,
		);
	}

	private function feed_head( string $bytes ): void {
		$from           = max( 0, strlen( $this->pending ) - 2 ); // A blank line may straddle the reads.
		$this->pending .= $bytes;
		$blank          = self::blank_line( $this->pending, $from );
		if ( null === $blank ) {
			if ( strlen( $this->pending ) > self::MAX_HEAD_BYTES ) {
				$this->fail( 'the answer\'s headers are longer than ' . self::MAX_HEAD_BYTES . ' bytes' );
			}
			return;
		}
		[ $at, $width ] = $blank;
		$head           = substr( $this->pending, 0, $at );
		$rest           = substr( $this->pending, $at + $width );
		$this->pending  = '';
		$this->begin( $head );
		if ( 'head' === $this->state ) {
			$this->take( $rest ); // An interim 1xx answer: the real one follows.
		} elseif ( 'body' === $this->state && '' !== $rest ) {
			$this->feed_body( $rest );
		}
	}

	/**
	 * Where the headers' blank line starts in `$text` (from `$from` on) and how wide it is:
	 * LF LF or LF CR LF (each line may end in CRLF or LF alone).
	 *
	 * @return array{0:int,1:int}|null
	 */
	private static function blank_line( string $text, int $from ): ?array {
		$lf   = strpos( $text, "\n\n", $from );
		$crlf = strpos( $text, "\n\r\n", $from );
		if ( false === $lf && false === $crlf ) {
			return null;
		}
		if ( false === $crlf || ( false !== $lf && $lf < $crlf ) ) {
			return array( $lf + 1, 1 );
		}
		return array( $crlf + 1, 2 );
	}

	/** The status line and headers of one answer: what comes next, and how the body ends. */
	private function begin( string $head ): void {
		$lines = explode( "\n", $head );
		if ( 1 !== preg_match( '#^HTTP/\d(?:\.\d)?[ \t]+(\d{3})#', $lines[0], $match ) ) {
			$this->fail( 'the answer is not HTTP' );
			return;
		}
		$status  = (int) $match[1];
		$lengths = array();
		$codings = array();
		$headers = array();
		$name    = '';
		foreach ( array_slice( $lines, 1 ) as $line ) {
			$line = rtrim( $line, "\r" );
			if ( '' !== $line && ( ' ' === $line[0] || "\t" === $line[0] ) ) {
				$value = trim( $line ); // An obsolete folded line continues the header above.
				if ( '' !== $name ) {
					$headers[ $name ] .= ' ' . $value;
				}
			} else {
				$colon = strpos( $line, ':' );
				if ( false === $colon ) {
					continue;
				}
				$name             = strtolower( trim( substr( $line, 0, $colon ) ) );
				$value            = trim( substr( $line, $colon + 1 ) );
				$headers[ $name ] = isset( $headers[ $name ] ) ? $headers[ $name ] . ', ' . $value : $value;
			}
			if ( 'content-length' === $name ) {
				$lengths = array_merge( $lengths, explode( ',', $value ) );
			} elseif ( 'transfer-encoding' === $name ) {
				$codings = array_merge( $codings, explode( ',', $value ) );
			}
		}

		if ( $status < 200 ) {
			return; // `100 Continue`, `103 Early Hints`: the answer comes after.
		}
		$this->status  = $status;
		$this->headers = $headers;
		$this->state   = 'body';
		$codings      = array_values( array_filter( array_map( static fn ( string $c ): string => strtolower( trim( $c ) ), $codings ), 'strlen' ) );
		$lengths      = array_values( array_unique( array_map( 'trim', $lengths ) ) );
		if ( 204 === $status || 304 === $status ) {
			$this->state = 'done'; // Never a body, whatever the headers say.
		} elseif ( array() !== $codings ) {
			// Chunked only when it is the last coding; otherwise the connection's end ends it.
			$this->framing = 'chunked' === end( $codings ) ? 'chunked' : 'close';
		} elseif ( array() !== $lengths ) {
			if ( 1 !== count( $lengths ) || 1 !== preg_match( '/^\d{1,18}$/', $lengths[0] ) ) {
				$this->fail( 'the answer\'s Content-Length is invalid' );
				return;
			}
			$this->framing = 'length';
			$this->length  = (int) $lengths[0];
			$this->left    = $this->length;
			if ( 0 === $this->left ) {
				$this->state = 'done';
			}
		} else {
			$this->framing = 'close';
		}
	}

	private function feed_body( string $bytes ): void {
		if ( 'close' === $this->framing ) {
			$this->body .= $bytes;
		} elseif ( 'length' === $this->framing ) {
			$take        = min( $this->left, strlen( $bytes ) ); // Bytes past the length are not the answer's.
			$this->body .= strlen( $bytes ) === $take ? $bytes : substr( $bytes, 0, $take );
			$this->left -= $take;
			if ( 0 === $this->left ) {
				$this->state = 'done';
			}
		} else {
			$this->feed_chunks( $bytes );
		}
	}

	/** The chunked body's state machine, over the new bytes and a line left incomplete. */
	private function feed_chunks( string $bytes ): void {
		$data          = '' === $this->pending ? $bytes : $this->pending . $bytes;
		$this->pending = '';
		$size          = strlen( $data );
		$at            = 0;
		while ( $at < $size && 'body' === $this->state ) {
			if ( 'data' === $this->chunk_state ) {
				$take        = min( $this->left, $size - $at );
				$this->body .= 0 === $at && $size === $take ? $data : substr( $data, $at, $take ); // At most one read's bytes.
				$at         += $take;
				$this->left -= $take;
				if ( 0 === $this->left ) {
					$this->chunk_state = 'data-end';
				}
				continue;
			}
			$eol = strpos( $data, "\n", $at );
			if ( false === $eol ) {
				$this->pending = substr( $data, $at );
				if ( strlen( $this->pending ) > self::MAX_LINE_BYTES ) {
					$this->fail( 'the answer\'s chunked body is malformed' );
				}
				return;
			}
			$line = rtrim( substr( $data, $at, $eol - $at ), "\r" );
			$at   = $eol + 1;
			$this->chunk_line( $line );
		}
	}

	/** One line of the chunked body: a chunk's size, the end of its data, or a trailer. */
	private function chunk_line( string $line ): void {
		if ( 'data-end' === $this->chunk_state ) {
			if ( '' !== $line ) {
				$this->fail( 'the answer\'s chunked body is malformed' );
				return;
			}
			$this->chunk_state = 'size';
		} elseif ( 'trailer' === $this->chunk_state ) {
			if ( '' === $line ) {
				$this->state = 'done'; // Trailers, if any, are not needed.
			}
		} else {
			$hex = trim( explode( ';', $line, 2 )[0] ); // A chunk extension is not needed either.
			if ( '' === $hex || ! ctype_xdigit( $hex ) || strlen( $hex ) > 15 ) {
				$this->fail( 'the answer\'s chunked body is malformed' );
				return;
			}
			$this->left        = (int) hexdec( $hex );
			$this->chunk_state = 0 === $this->left ? 'trailer' : 'data';
		}
	}

	private function fail( string $error ): void {
		$this->error = $error;
		$this->state = 'done';
		$this->body  = '';
	}

	/** @return array{status:int,body:string,error:string} */
	private static function failure( string $error ): array {
		return array(
			'status' => 0,
			'body'   => '',
			'error'  => $error,
		);
	}
}
