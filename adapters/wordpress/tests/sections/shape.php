<?php
/**
 * The store implements the four interfaces with exactly their signatures; the workspace scope
 * normalises and validates as Agents API's does.
 *
 * @package Convograph
 */

declare( strict_types=1 );

use AgentsAPI\Core\Database\Chat\WP_Agent_Conversation_Lock;
use AgentsAPI\Core\Database\Chat\WP_Agent_Conversation_Store;
use AgentsAPI\Core\Database\Chat\WP_Agent_Principal_Conversation_Session_Reader;
use AgentsAPI\Core\Database\Chat\WP_Agent_Principal_Conversation_Store;
use AgentsAPI\Core\Workspace\WP_Agent_Workspace_Scope;

function contract_section_shape( Contract_Run $t ): void {
	$c = $t->c;

	$interfaces = array(
		WP_Agent_Conversation_Store::class,
		WP_Agent_Principal_Conversation_Store::class,
		WP_Agent_Principal_Conversation_Session_Reader::class,
		WP_Agent_Conversation_Lock::class,
	);
	$class = new ReflectionClass( Convograph_Conversation_Store::class );
	$c->check( $class->isFinal(), 'Convograph_Conversation_Store is final' );
	$checked = array();
	foreach ( $interfaces as $interface ) {
		$c->check( $t->store instanceof $interface, 'implements ' . $interface );
		foreach ( ( new ReflectionClass( $interface ) )->getMethods() as $declared ) {
			if ( isset( $checked[ $declared->getName() ] ) ) {
				continue; // Inherited from an interface checked already.
			}
			$checked[ $declared->getName() ] = true;
			$c->same( contract_signature( $declared ), contract_signature( $class->getMethod( $declared->getName() ) ), $declared->getName() . '() has the interface\'s exact signature' );
		}
	}
	$c->same( 13, count( $checked ), 'the four interfaces declare 13 methods, all checked' );
	$constructor = array_map( static fn ( ReflectionParameter $p ): string => (string) $p->getType() . ' $' . $p->getName(), $class->getConstructor()->getParameters() );
	$c->same( array( 'string $endpoint', 'string $service_token', '?callable $http' ), $constructor, 'constructed with (string $endpoint, string $service_token, ?callable $http = null)' );

	$scope = WP_Agent_Workspace_Scope::from_parts( ' SITE ', ' 42 ' );
	$c->same( array( 'site', '42', 'site:42' ), array( $scope->workspace_type, $scope->workspace_id, $scope->key() ), 'from_parts lower-cases and trims' );
	$c->same( $scope->to_array(), WP_Agent_Workspace_Scope::from_array( $scope->to_array() )->to_array(), 'from_array(to_array()) round-trips' );
	$c->same( 'site:7', WP_Agent_Workspace_Scope::from_array( array( 'workspace_type' => 'site', 'workspace_id' => 7 ) )->key(), 'from_array casts a scalar id' );
	foreach ( array( array( '1site', 'x' ), array( 'si te', 'x' ), array( '', 'x' ), array( 'site', '  ' ) ) as [ $type, $id ] ) {
		try {
			WP_Agent_Workspace_Scope::from_parts( $type, $id );
			$c->check( false, "from_parts('{$type}', '{$id}') throws InvalidArgumentException", 'it did not throw' );
		} catch ( InvalidArgumentException $e ) {
			$c->check( true, "from_parts('{$type}', '{$id}') throws InvalidArgumentException" );
		}
	}
}

/** A method's signature as text: parameters with types and defaults, and the return type. */
function contract_signature( ReflectionMethod $method ): string {
	$params = array();
	foreach ( $method->getParameters() as $p ) {
		$params[] = (string) $p->getType() . ' $' . $p->getName() . ( $p->isDefaultValueAvailable() ? ' = ' . var_export( $p->getDefaultValue(), true ) : '' );
	}
	return $method->getName() . '(' . implode( ', ', $params ) . '): ' . (string) $method->getReturnType();
}
