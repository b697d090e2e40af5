<?php
/**
 * Stand-in for Agents API's workspace scope value object, written from its documented
 * contract (convograph's shared/SEEDS.md). It is declared only when Agents API's own class
 * is not loaded: outside WordPress (the adapter's tests) or on a site without Agents API.
 *
 * @package Convograph
 */

declare( strict_types=1 );

namespace AgentsAPI\Core\Workspace;

if ( ! class_exists( WP_Agent_Workspace_Scope::class ) ) {

	/**
	 * The workspace dimension shared by agent stores: a type (`^[a-z][a-z0-9_-]*$`) and a
	 * non-empty id; its key is `type:id`.
	 */
	final class WP_Agent_Workspace_Scope {

		private const TYPE_PATTERN = '/^[a-z][a-z0-9_-]*$/';

		/**
		 * @param string $workspace_type Workspace kind, already normalised (e.g. `site`).
		 * @param string $workspace_id   Stable id within that kind, already trimmed.
		 * @throws \InvalidArgumentException When either part is invalid.
		 */
		public function __construct(
			public readonly string $workspace_type,
			public readonly string $workspace_id,
		) {
			if ( 1 !== preg_match( self::TYPE_PATTERN, $workspace_type ) ) {
				throw new \InvalidArgumentException( 'Workspace type must match ' . self::TYPE_PATTERN . '.' );
			}
			if ( '' === $workspace_id ) {
				throw new \InvalidArgumentException( 'Workspace id must be a non-empty string.' );
			}
		}

		/**
		 * A scope from raw parts: the type lower-cased and trimmed, the id trimmed.
		 *
		 * @throws \InvalidArgumentException When a part is invalid after normalisation.
		 */
		public static function from_parts( string $workspace_type, string $workspace_id ): self {
			return new self( strtolower( trim( $workspace_type ) ), trim( $workspace_id ) );
		}

		/**
		 * A scope from `array( 'workspace_type' => ..., 'workspace_id' => ... )`; scalar parts are
		 * cast to strings, anything else counts as empty.
		 *
		 * @param array<array-key,mixed> $value Raw scope.
		 * @throws \InvalidArgumentException When a part is missing or invalid.
		 */
		public static function from_array( array $value ): self {
			$type = $value['workspace_type'] ?? '';
			$id   = $value['workspace_id'] ?? '';
			return self::from_parts(
				is_scalar( $type ) ? (string) $type : '',
				is_scalar( $id ) ? (string) $id : ''
			);
		}

		/** @return array{workspace_type:string,workspace_id:string} */
		public function to_array(): array {
			return array(
				'workspace_type' => $this->workspace_type,
				'workspace_id'   => $this->workspace_id,
			);
		}

		/** The scope's key, `type:id`. */
		public function key(): string {
			return $this->workspace_type . ':' . $this->workspace_id;
		}
	}
}
