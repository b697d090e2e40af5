<?php
/**
 * Plugin Name:       Convograph Agents Store
 * Description:       Stores Agents API conversation sessions in convograph (GraphQL), one SERVICE token per site.
 * Version:           1.0.0
 * Requires PHP:      8.1
 * License:           GPL-2.0-or-later
 * Text Domain:       convograph-agents-store
 *
 * Configure with two options:
 *     update_option( 'convograph_endpoint', 'https://convograph.example/graphql' );
 *     update_option( 'convograph_service_token', 'cvg_…' );
 * Until both are set the filter leaves the store Agents API would otherwise use.
 *
 * @package Convograph
 */

declare( strict_types=1 );

defined( 'ABSPATH' ) || exit;

add_filter( 'wp_agent_conversation_store', 'convograph_agents_conversation_store', 10, 1 );

/**
 * `wp_agent_conversation_store` callback: the convograph store once it is configured.
 *
 * The adapter's files are loaded here, not when the plugin loads: by the time Agents API
 * applies its filter it has declared its own interfaces, so the stand-ins in src/contracts/
 * are never declared beside them (whatever order the plugins load in).
 *
 * @param mixed $store The store chosen so far (null, the bundled store, another plugin's).
 * @return mixed
 */
function convograph_agents_conversation_store( mixed $store ): mixed {
	static $instance = null;
	if ( null !== $instance ) {
		return $instance;
	}
	$endpoint = get_option( 'convograph_endpoint', '' );
	$token    = get_option( 'convograph_service_token', '' );
	if ( ! is_string( $endpoint ) || ! is_string( $token ) || '' === trim( $endpoint ) || '' === trim( $token ) ) {
		return $store;
	}
	require_once __DIR__ . '/src/class-convograph-conversation-store.php';
	$instance = new Convograph_Conversation_Store( trim( $endpoint ), trim( $token ) );
	return $instance;
}
