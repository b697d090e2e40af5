<?php
/**
 * The plugin as WordPress loads it, in a process of its own (it defines WordPress's global
 * functions): a WordPress just big enough for it (options, filters, the HTTP API, WP_Error),
 * the real convograph server behind wp_remote_post.
 *
 *   php wordpress_bootstrap_check.php [--with-agents-api]
 *
 * With --with-agents-api, Agents API's own contracts are loaded first, as on a site where it
 * is active. Prints one line per check, then one JSON line: {"passed", "failed", "deleted"}.
 * Reads the contract program's environment (CONVOGRAPH_URL, CONVOGRAPH_TOKEN, ...).
 *
 * @package Convograph
 */

declare( strict_types=1 );

define( 'ABSPATH', __DIR__ . '/' );

require_once __DIR__ . '/lib/checks.php';

$GLOBALS['wp_options']      = array();
$GLOBALS['wp_filters']      = array();
$GLOBALS['wp_remote_calls'] = 0;
$GLOBALS['wp_remote_error'] = null;

function get_option( string $option, mixed $default_value = false ): mixed {
	return $GLOBALS['wp_options'][ $option ] ?? $default_value;
}

function add_filter( string $hook_name, callable $callback, int $priority = 10, int $accepted_args = 1 ): bool {
	$GLOBALS['wp_filters'][ $hook_name ][ $priority ][] = array( $callback, $accepted_args );
	return true;
}

function apply_filters( string $hook_name, mixed $value, mixed ...$args ): mixed {
	$by_priority = $GLOBALS['wp_filters'][ $hook_name ] ?? array();
	ksort( $by_priority );
	foreach ( $by_priority as $callbacks ) {
		foreach ( $callbacks as [ $callback, $accepted ] ) {
			$value = $callback( ...array_slice( array_merge( array( $value ), $args ), 0, $accepted ) );
		}
	}
	return $value;
}

final class WP_Error {
	public function __construct( private string $code = '', private string $message = '' ) {}

	public function get_error_code(): string {
		return $this->code;
	}

	public function get_error_message(): string {
		return $this->message;
	}
}

function is_wp_error( mixed $thing ): bool {
	return $thing instanceof WP_Error;
}

function wp_generate_uuid4(): string {
	$b    = random_bytes( 16 );
	$b[6] = chr( ( ord( $b[6] ) & 0x0f ) | 0x40 );
	$b[8] = chr( ( ord( $b[8] ) & 0x3f ) | 0x80 );
	return vsprintf( '%s%s-%s-%s-%s-%s%s%s', str_split( bin2hex( $b ), 4 ) );
}

/**
 * WordPress's wp_remote_post, over curl, with the contract program's pre-SERVICE emulation of
 * the Convograph-Owner header when CONVOGRAPH_OWNER_TOKENS is set.
 *
 * @param array<string,mixed> $args
 * @return array<string,mixed>|WP_Error
 */
function wp_remote_post( string $url, array $args = array() ): array|WP_Error {
	++$GLOBALS['wp_remote_calls'];
	if ( null !== $GLOBALS['wp_remote_error'] ) {
		return new WP_Error( 'http_request_failed', $GLOBALS['wp_remote_error'] );
	}
	$headers = (array) ( $args['headers'] ?? array() );
	$owner   = $headers['Convograph-Owner'] ?? null;
	$tokens  = array();
	foreach ( array_filter( explode( ',', (string) getenv( 'CONVOGRAPH_OWNER_TOKENS' ) ) ) as $pair ) {
		$at                                       = (int) strrpos( $pair, '=' );
		$tokens[ trim( substr( $pair, 0, $at ) ) ] = trim( substr( $pair, $at + 1 ) );
	}
	if ( array() !== $tokens ) {
		unset( $headers['Convograph-Owner'] );
		if ( null !== $owner ) {
			$headers['Authorization'] = 'Bearer ' . ( $tokens[ $owner ] ?? 'no-token-for-' . $owner );
		}
	}
	$lines = array();
	foreach ( $headers as $name => $value ) {
		$lines[] = "{$name}: {$value}";
	}
	$received = array(); // As WordPress keeps them: lower-case names.
	$handle   = curl_init( $url );
	curl_setopt_array(
		$handle,
		array(
			CURLOPT_POST           => true,
			CURLOPT_POSTFIELDS     => (string) ( $args['body'] ?? '' ),
			CURLOPT_HTTPHEADER     => $lines,
			CURLOPT_RETURNTRANSFER => true,
			CURLOPT_TIMEOUT_MS     => (int) ( 1000 * (float) ( $args['timeout'] ?? 5 ) ),
			CURLOPT_HEADERFUNCTION => static function ( $handle, string $line ) use ( &$received ): int {
				if ( false !== strpos( $line, ':' ) ) {
					[ $name, $value ] = explode( ':', $line, 2 );
					$received[ strtolower( trim( $name ) ) ] = trim( $value );
				}
				return strlen( $line );
			},
		)
	);
	$body   = curl_exec( $handle );
	$status = (int) curl_getinfo( $handle, CURLINFO_RESPONSE_CODE );
	$error  = curl_error( $handle );
	curl_close( $handle );
	if ( ! is_string( $body ) || 0 === $status ) {
		return new WP_Error( 'http_request_failed', 'cURL error: ' . $error );
	}
	return array(
		'headers'  => $received,
		'body'     => $body,
		'response' => array(
			'code'    => $status,
			'message' => '',
		),
	);
}

/** @param array<string,mixed>|WP_Error $response */
function wp_remote_retrieve_response_code( array|WP_Error $response ): int|string {
	return is_array( $response ) ? $response['response']['code'] : '';
}

/**
 * @param array<string,mixed>|WP_Error $response
 * @return array<string>|string '' when the answer has no such header.
 */
function wp_remote_retrieve_header( array|WP_Error $response, string $header ): array|string {
	return is_array( $response ) ? ( $response['headers'][ strtolower( $header ) ] ?? '' ) : '';
}

/** @param array<string,mixed>|WP_Error $response */
function wp_remote_retrieve_body( array|WP_Error $response ): string {
	return is_array( $response ) ? (string) $response['body'] : '';
}

function bootstrap_check_main( bool $with_agents_api ): void {
	$c = new Contract_Checks();
	$c->section( 'WordPress ' . ( $with_agents_api ? 'with Agents API\'s contracts loaded first' : 'without Agents API (the stand-in contracts)' ) );
	$log = (string) tempnam( sys_get_temp_dir(), 'convograph-wp-log-' );
	ini_set( 'error_log', $log );
	$deleted = array();

	if ( $with_agents_api ) {
		require_once __DIR__ . '/fixtures/agents-api-contracts.php';
	}
	// Agents API's bundled store answers at priority 5 when nothing else has.
	$bundled = new stdClass();
	add_filter( 'wp_agent_conversation_store', static fn ( mixed $store ): mixed => $store ?? $bundled, 5 );

	require dirname( __DIR__ ) . '/convograph-agents-store.php';
	$c->check( ! class_exists( 'Convograph_Conversation_Store', false ), 'loading the plugin loads no class yet' );
	$c->same( $bundled, apply_filters( 'wp_agent_conversation_store', null, array() ), 'not configured: the filter keeps the store it was given' );
	$c->check( ! class_exists( 'Convograph_Conversation_Store', false ), 'not configured: the adapter is not even loaded' );

	$GLOBALS['wp_options']['convograph_endpoint']      = ' ' . getenv( 'CONVOGRAPH_URL' ) . ' ';
	$GLOBALS['wp_options']['convograph_service_token'] = (string) getenv( 'CONVOGRAPH_TOKEN' );
	$store = apply_filters( 'wp_agent_conversation_store', null, array() );
	$c->check( $store instanceof Convograph_Conversation_Store, 'configured: the filter returns the convograph store, over the bundled one', get_debug_type( $store ) );
	$c->check( $store === apply_filters( 'wp_agent_conversation_store', null, array() ), 'one store per request' );
	$c->check( $store instanceof AgentsAPI\Core\Database\Chat\WP_Agent_Principal_Conversation_Session_Reader && $store instanceof AgentsAPI\Core\Database\Chat\WP_Agent_Conversation_Lock, 'it is a Session_Reader and a Lock' );
	$declared_in = basename( (string) ( new ReflectionClass( AgentsAPI\Core\Database\Chat\WP_Agent_Conversation_Store::class ) )->getFileName() );
	$c->same( $with_agents_api ? 'agents-api-contracts.php' : 'conversation-store-interfaces.php', $declared_in, 'the interfaces in use are ' . ( $with_agents_api ? 'Agents API\'s' : 'the stand-ins' ) );
	if ( ! $store instanceof Convograph_Conversation_Store ) {
		return;
	}

	[ $type, $id ] = explode( ':', (string) ( getenv( 'CONVOGRAPH_WORKSPACE' ) ?: 'site:1' ), 2 );
	$ws            = AgentsAPI\Core\Workspace\WP_Agent_Workspace_Scope::from_parts( $type, $id );
	$sid           = $store->create_session( $ws, 1, 'wp-bootstrap', array( 'via' => 'wp_remote_post' ) );
	$c->check( '' !== $sid, 'create_session through wp_remote_post' );
	$c->check( $GLOBALS['wp_remote_calls'] >= 2, 'the default transport in WordPress is wp_remote_post', $GLOBALS['wp_remote_calls'] . ' calls' );
	$c->same( true, $store->update_session( $sid, array( array( 'role' => 'user', 'content' => 'hi' ) ) ), 'update_session' );
	$c->same( array( array( 'role' => 'user', 'content' => 'hi' ) ), ( $store->get_session( $sid ) ?? array() )['messages'] ?? null, 'get_session reads it back' );
	$c->same( true, $store->delete_session( $sid ), 'delete_session' );
	$c->same( null, $store->get_session( $sid ), 'gone' );
	$deleted[] = $sid;

	$GLOBALS['wp_remote_error'] = 'cURL error 7: Failed to connect';
	$c->same( null, $store->get_session( $sid ), 'a WP_Error from wp_remote_post: the failure value' );
	$lines = array_values( array_filter( explode( "\n", (string) file_get_contents( $log ) ) ) );
	$c->check( 1 === count( $lines ) && str_contains( $lines[0], 'cURL error 7' ), 'and one log line with its message', Contract_Checks::show( $lines ) );
	@unlink( $log ); // phpcs:ignore WordPress.PHP.NoSilencedErrors.Discouraged

	echo json_encode(
		array(
			'passed'  => $c->count_passed(),
			'failed'  => $c->failures(),
			'deleted' => $deleted,
		)
	), "\n";
}

bootstrap_check_main( in_array( '--with-agents-api', $argv, true ) );
