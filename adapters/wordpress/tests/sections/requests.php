<?php
/**
 * The requests as they leave the store (recorded on their way to the real server): who names
 * an owner and who does not, what the bodies carry; a lost answer to a create is retried
 * without a duplicate, a lock never; broken transports; the streams transport end to end.
 *
 * @package Convograph
 */

declare( strict_types=1 );

function contract_section_requests( Contract_Run $t ): void {
	$c       = $t->c;
	$ws      = $t->ws;
	$sent    = array();
	$forward = $t->env->transport();
	$s       = new Convograph_Conversation_Store(
		$t->env->url,
		$t->env->token,
		static function ( string $url, array $headers, string $body, float $timeout ) use ( &$sent, $forward ): array {
			$sent[] = array(
				'headers' => $headers,
				'body'    => json_decode( $body, true ),
				'raw'     => $body,
				'timeout' => $timeout,
			);
			return $forward( $url, $headers, $body, $timeout );
		}
	);
	$owner_of = static fn ( array $request ): ?string => $request['headers'][ Contract_Environment::OWNER_HEADER ] ?? null;
	$find     = static function ( string $operation ) use ( &$sent ): array {
		foreach ( $sent as $request ) {
			if ( str_contains( (string) ( $request['body']['query'] ?? '' ), $operation . '(' ) ) {
				return $request;
			}
		}
		return array( 'headers' => array(), 'body' => array(), 'raw' => '' );
	};

	$one = $t->record->created( 'user:1', $s->create_session( $ws, 1, $t->tag . '-req', array(), 'chat' ) );
	$c->same( 2, count( $sent ), 'the first workspace call asks for the token\'s workspace, then creates' );
	$c->check( str_contains( (string) ( $sent[0]['body']['query'] ?? '' ), 'viewer' ) && null === $owner_of( $sent[0] ), 'the workspace is asked as the token itself (viewer, no owner)' );
	$create = $sent[1] ?? array( 'headers' => array(), 'body' => array(), 'raw' => '' );
	$c->same( 'user:1', $owner_of( $create ), 'create_session(user 1) sends Convograph-Owner: user:1' );
	$c->same( 'Bearer ' . $t->env->token, $create['headers']['Authorization'] ?? null, 'with the site\'s one token as the bearer' );
	$c->same( 'application/json', $create['headers']['Content-Type'] ?? null, 'as JSON' );
	$input = $create['body']['variables']['input'] ?? array();
	$c->same( array( 'agentSlug', 'metadata', 'context', 'idempotencyKey' ), array_keys( $input ), 'createConversation gets agentSlug, metadata, context, idempotencyKey' );
	$c->check( str_contains( $create['raw'], '"metadata":{}' ), 'empty metadata travels as a JSON object {}' );
	$c->check( 1 === preg_match( CONTRACT_UUID4, (string) ( $input['idempotencyKey'] ?? '' ) ), 'the idempotency key is a UUIDv4' );

	$two = $t->record->created( 'user:2', $s->create_session_for_owner( $ws, array( 'type' => ' User ', 'key' => '2' ), $t->tag . '-req' ) );
	$c->same( 'user:2', $owner_of( end( $sent ) ), "create_session_for_owner(' User ', '2') sends Convograph-Owner: user:2" );
	$s->list_sessions( $ws, 1, array( 'limit' => 1 ) );
	$s->get_recent_pending_session( $ws, 1 );
	$s->get_session_for_owner( $ws, Contract_Run::USER_2, $two );
	$c->same( array( 'user:1', 'user:1', 'user:2' ), array_map( $owner_of, array_slice( $sent, -3 ) ), 'list, recent-pending and get_session_for_owner name their owner' );
	$viewers = array_filter( $sent, static fn ( array $r ): bool => str_contains( (string) ( $r['body']['query'] ?? '' ), 'viewer' ) );
	$c->same( 1, count( $viewers ), 'the workspace is asked once per store' );

	$sent = array();
	$s->get_session( $one );
	$s->update_session( $one, array( array( 'role' => 'user' ), array() ), array() );
	$s->update_title( $one, 'requests' );
	$lock = (string) $s->acquire_session_lock( $one, 5 );
	$s->release_session_lock( $one, $lock );
	$s->delete_session( $t->tag . '-no-such-id' );
	$c->same( array_fill( 0, 7, null ), array_map( $owner_of, $sent ), 'get, update (reading the stored token_id first), title, locks and delete name no owner (the token reaches the id)' );
	$update = $find( 'replaceTranscript' );
	$c->same( array( 'conversationId', 'messages', 'metadata', 'expectedVersion' ), array_keys( $update['body']['variables']['input'] ?? array() ), "update_session with '' / '' / null sends no provider, model or providerResponseId; after a read, the version read" );
	$c->check( is_int( $update['body']['variables']['input']['expectedVersion'] ?? null ), 'expectedVersion is the version get_session read (an Int)' );
	$c->check( str_contains( $update['raw'], '"messages":[{"role":"user"},{}]' ) && str_contains( $update['raw'], '"metadata":{}' ), 'an empty message and empty metadata travel as {}' );
	$c->check( array() === array_filter( $sent, static fn ( array $r ): bool => ! ( $r['timeout'] > 0 && $r['timeout'] <= Convograph_Conversation_Store::DEFAULT_TIMEOUT_SECONDS ) ), 'every request gets what is left of the 10 s budget' );
	$sent = array();
	$s->update_session( $one, array(), array( 'token_id' => 5 ), 'p', 'm', '' );
	$c->same( 1, count( $sent ), 'with a token_id of its own, update_session is one request' );
	$input = $find( 'replaceTranscript' )['body']['variables']['input'] ?? array();
	$c->same( array( 'p', 'm', '' ), array( $input['provider'] ?? null, $input['model'] ?? null, $input['providerResponseId'] ?? null ), "a given response id is sent, '' included" );
	$t->record->expect(
		$one,
		array(
			'title'              => 'requests',
			'provider'           => 'p',
			'model'              => 'm',
			'providerResponseId' => '',
			'metadata'           => (object) array( 'token_id' => 5 ),
		)
	);

	// A create whose answer is lost is retried with the same key: one session, not two.
	$attempts = array();
	$lossy    = new Convograph_Conversation_Store( $t->env->url, $t->env->token, contract_losing( 'createConversation', $forward, $attempts ) );
	$idem     = $t->record->created( 'user:1', $lossy->create_session( $ws, 1, $t->tag . '-idem' ) );
	$c->check( '' !== $idem, 'the retried create returns the session' );
	$c->same( 2, count( $attempts ), 'the create was sent twice (the first answer was lost)' );
	$c->same( $attempts[0] ?? null, $attempts[1] ?? 'none', 'both attempts carry the same body (the same idempotency key)' );
	$c->same( array( $idem ), contract_ids( $t->store->list_sessions( $ws, 1, array( 'agent_slug' => $t->tag . '-idem' ) ) ), 'exactly one session exists' );

	// A lock whose answer is lost is asked for again with the same token: the caller holds
	// the lock the first attempt was granted (before, null, and the lock held by nobody).
	$attempts = array();
	$lossy    = new Convograph_Conversation_Store( $t->env->url, $t->env->token, contract_losing( 'acquireLock', $forward, $attempts ) );
	$held     = $t->quietly( fn () => $lossy->acquire_session_lock( $idem, 60 ), 'acquire_session_lock with a lost answer' );
	$c->check( is_string( $held ) && '' !== $held, 'the retried acquire returns the lock' );
	$c->same( 2, count( $attempts ), 'acquireLock was sent twice (the first answer was lost)' );
	$c->same( $attempts[0] ?? null, $attempts[1] ?? 'none', 'both attempts carry the same body (the same token)' );
	$c->same( null, $t->store->acquire_session_lock( $idem ), 'anyone else still meets the lock' );
	$c->same( true, $t->store->release_session_lock( $idem, (string) $held ), 'its holder releases it' );

	// Broken transports and answers.
	$broken = array(
		'a transport that throws'   => array( static fn (): array => throw new RuntimeException( 'boom' ), 'boom' ),
		'an HTML answer'            => array( static fn (): array => array( 'status' => 200, 'body' => '<html>' ), 'not JSON' ),
		'a 502 from a proxy'        => array( static fn (): array => array( 'status' => 502, 'body' => 'Bad gateway' ), 'HTTP 502' ),
		'a GraphQL error'           => array( static fn (): array => array( 'status' => 200, 'body' => '{"errors":[{"message":"Unexpected error.","extensions":{"code":"INTERNAL"}}]}' ), 'Unexpected error. [INTERNAL]' ),
		'a transport without shape' => array( static fn (): array => array(), 'no response' ),
	);
	foreach ( $broken as $name => [ $transport, $why ] ) {
		$store = new Convograph_Conversation_Store( $t->env->url, $t->env->token, $transport );
		$t->fails_once( null, fn () => $store->get_session( $one ), "get_session through {$name}", $why );
	}
	$bad_url = new Convograph_Conversation_Store( 'file:///etc/passwd', $t->env->token );
	$t->fails_once( null, fn () => $bad_url->get_session( $one ), 'an endpoint that is not http(s)', 'http(s) URL' );

	// Without WordPress the default transport is curl; PHP's streams work end to end too.
	$c->same( 'curl', ( new ReflectionFunction( Closure::fromCallable( Convograph_Http::default_transport() ) ) )->getName(), 'outside WordPress, with the curl extension, the default transport is curl' );
	$st    = $t->env->store( Convograph_Http::streams( ... ) );
	$turns = contract_turns( 'streams', 3 );
	$sid   = $t->quietly( fn () => $t->record->created( 'user:1', $st->create_session( $ws, 1, $t->tag . '-streams', array( 'via' => 'streams' ) ) ), 'streams: create_session' );
	$c->same( true, $st->update_session( $sid, $turns, array( 'via' => 'streams' ), 'openai', 'gpt', 'r-streams' ), 'streams: update_session' );
	$row = $st->get_session_for_owner( $ws, Contract_Run::USER_1, $sid ) ?? array();
	$c->same( array( $turns, 'openai', 'r-streams' ), array( $row['messages'] ?? null, $row['provider'] ?? null, $row['provider_response_id'] ?? null ), 'streams: read back' );
	$c->same( array( $sid ), contract_ids( $st->list_sessions( $ws, 1, array( 'agent_slug' => $t->tag . '-streams' ) ) ), 'streams: listed' );
	$lock = $st->acquire_session_lock( $sid );
	$c->check( is_string( $lock ) && null === $st->acquire_session_lock( $sid ) && $st->release_session_lock( $sid, (string) $lock ), 'streams: lock, contention, release' );
	$t->record->expect(
		$sid,
		array(
			'transcript' => contract_wire_messages( $turns ),
			'metadata'   => (object) array( 'via' => 'streams' ),
		)
	);

	contract_refused_before_execution( $t );
}

/**
 * Answers refused before anything ran (convograph's 503 or 200 with DATABASE_UNAVAILABLE and
 * no `path`, a 429) are sent again, a save included, after the Retry-After; a refusal that
 * may follow a write (a gateway's 503, DATABASE_UNAVAILABLE with a `path`) is not; nor is one
 * whose wait is too long, nor one refused every time. Before, each refusal failed the call:
 * a chat turn saved while the database restarted was lost unless the host saved it again.
 */
function contract_refused_before_execution( Contract_Run $t ): void {
	$c       = $t->c;
	$ws      = $t->ws;
	$forward = $t->env->transport();
	$before  = '{"errors":[{"message":"the database is unavailable","extensions":{"code":"DATABASE_UNAVAILABLE","requestId":"r1"}}]}';
	$cases   = array(
		'convograph\'s 503 before execution, Retry-After: 1' => array(
			array(
				'status'  => 503,
				'body'    => $before,
				'headers' => array( 'Retry-After' => '1' ),
			),
		),
		'DATABASE_UNAVAILABLE before the operation (HTTP 200, data null)' => array(
			array(
				'status' => 200,
				'body'   => '{"data":null,"errors":[{"message":"the database is unavailable","extensions":{"code":"DATABASE_UNAVAILABLE"}}]}',
			),
		),
		'a 429 twice, Retry-After: 0' => array_fill(
			0,
			2,
			array(
				'status'  => 429,
				'body'    => '{"errors":[{"message":"rate limit exceeded","extensions":{"code":"RATE_LIMITED","retryAfterSeconds":1}}]}',
				'headers' => array( 'retry-after' => '0' ),
			)
		),
		// Not a delay nor a date: the body's wait (strtotime() read '-1' as an hour's).
		'a 429 with Retry-After: -1' => array(
			array(
				'status'  => 429,
				'body'    => '{"errors":[{"message":"rate limit exceeded","extensions":{"code":"RATE_LIMITED","retryAfterSeconds":0}}]}',
				'headers' => array( 'retry-after' => '-1' ),
			),
		),
	);
	foreach ( $cases as $name => $answers ) {
		$sid      = $t->record->created( 'user:1', $t->store->create_session( $ws, 1, $t->tag . '-refused-first' ) );
		$turns    = contract_turns( "saved after {$name}", 2 );
		$attempts = array();
		$store    = new Convograph_Conversation_Store( $t->env->url, $t->env->token, contract_refusing( 'replaceTranscript', $forward, $answers, $attempts ) );
		$started  = microtime( true );
		$saved    = $t->quietly( fn () => $store->update_session( $sid, $turns, array( 'token_id' => 3 ) ), "{$name}: update_session" );
		$took     = microtime( true ) - $started;
		$c->same( true, $saved, "{$name}: update_session is sent again and saves the turn" );
		$c->same( count( $answers ) + 1, count( $attempts ), "{$name}: one attempt per refusal, and the one that ran" );
		$c->same( $turns, ( $t->store->get_session( $sid ) ?? array() )['messages'] ?? null, "{$name}: the turns are stored, once" );
		if ( isset( $answers[0]['headers']['Retry-After'] ) ) {
			$c->check( $took >= 0.9, sprintf( '%s: it waited the Retry-After second (took %.3f s)', $name, $took ) );
		}
		$t->record->expect( $sid, array( 'transcript' => contract_wire_messages( $turns ) ) );
	}

	// Not sent again: what may follow a write that ran, a wait past the cap, refusals that go on.
	$refused = array(
		'a gateway\'s 503'                             => array( 1, 'HTTP 503', array( 'status' => 503, 'body' => '<html>Service Unavailable</html>', 'headers' => array( 'retry-after' => '1' ) ) ),
		'DATABASE_UNAVAILABLE during the operation'    => array( 1, 'DATABASE_UNAVAILABLE', array( 'status' => 200, 'body' => '{"data":null,"errors":[{"message":"the database is unavailable","path":["replaceTranscript"],"extensions":{"code":"DATABASE_UNAVAILABLE"}}]}' ) ),
		'a 429 asking for 30 s'                        => array( 1, 'not retried: the server asks to wait 30 s, more than the 5 s a call waits', array( 'status' => 429, 'body' => '{"errors":[{"message":"slow down","extensions":{"code":"RATE_LIMITED"}}]}', 'headers' => array( 'retry-after' => '30' ) ) ),
		'a 429 asking for 10000000000 s'               => array( 1, 'not retried: the server asks to wait 10000000000 s, more than the 5 s a call waits', array( 'status' => 429, 'body' => 'Too Many Requests', 'headers' => array( 'retry-after' => '10000000000' ) ) ),
		'a 429 asking for a date a minute on'          => array( 1, 'more than the 5 s a call waits', array( 'status' => 429, 'body' => 'Too Many Requests', 'headers' => array( 'retry-after' => gmdate( 'D, d M Y H:i:s \G\M\T', time() + 60 ) ) ) ),
		'a 429 every time'                             => array( 3, '(refused 3 times); nothing of it was run', array( 'status' => 429, 'body' => '{"errors":[{"message":"slow down","extensions":{"code":"RATE_LIMITED","retryAfterSeconds":0}}]}' ) ),
	);
	foreach ( $refused as $name => [ $expected_attempts, $why, $answer ] ) {
		$sid      = $t->record->created( 'user:1', $t->store->create_session( $ws, 1, $t->tag . '-refused-first' ) );
		$attempts = array();
		$store    = new Convograph_Conversation_Store( $t->env->url, $t->env->token, contract_refusing( 'replaceTranscript', $forward, array_fill( 0, 5, $answer ), $attempts ) );
		$started  = microtime( true );
		$t->fails_once( false, fn () => $store->update_session( $sid, contract_turns( 'refused', 1 ), array( 'token_id' => 3 ) ), "{$name}: update_session", $why );
		$c->same( $expected_attempts, count( $attempts ), "{$name}: sent {$expected_attempts} time(s)" );
		$c->check( microtime( true ) - $started < 1.0, "{$name}: no wait for what is not sent again" );
		$c->same( array(), ( $t->store->get_session( $sid ) ?? array() )['messages'] ?? null, "{$name}: nothing stored" );
	}

	// A wait past what is left of the call, after an attempt that used half of it: the log
	// line says the time left (it named the whole timeout, as if the wait had been shorter).
	$sid      = $t->record->created( 'user:1', $t->store->create_session( $ws, 1, $t->tag . '-refused-late' ) );
	$attempts = array();
	$slow     = contract_refusing( 'replaceTranscript', $forward, array( array( 'status' => 429, 'body' => 'Too Many Requests', 'headers' => array( 'retry-after' => '2' ) ) ), $attempts );
	$store    = new Convograph_Conversation_Store(
		$t->env->url,
		$t->env->token,
		static function ( string $url, array $headers, string $body, float $timeout ) use ( $slow ): array {
			if ( str_contains( $body, 'replaceTranscript(' ) ) {
				usleep( 1000000 );
			}
			return $slow( $url, $headers, $body, $timeout );
		}
	);
	$store->set_timeout( 2.5 );
	$t->fails_once( false, fn () => $store->update_session( $sid, contract_turns( 'refused late', 1 ), array( 'token_id' => 3 ) ), 'a wait past the time left: update_session', "s left of this call's 2.5 s; nothing of it was run" );
	$c->same( 1, count( $attempts ), 'a wait past the time left: sent once' );
}

/**
 * A transport that answers the requests whose body mentions `$operation` with `$answers`, one
 * each, in order, without forwarding them, then forwards them; each such attempt's body is
 * recorded.
 *
 * @param list<array<string,mixed>> $answers
 * @param list<string>              $attempts
 */
function contract_refusing( string $operation, callable $forward, array $answers, array &$attempts ): callable {
	return static function ( string $url, array $headers, string $body, float $timeout ) use ( $operation, $forward, $answers, &$attempts ): array {
		if ( ! str_contains( $body, $operation . '(' ) ) {
			return $forward( $url, $headers, $body, $timeout );
		}
		$attempts[] = $body;
		return $answers[ count( $attempts ) - 1 ] ?? $forward( $url, $headers, $body, $timeout );
	};
}

/**
 * A transport that delivers the first request whose body mentions `$operation` but loses its
 * answer (as a dropped connection would), recording each such attempt's body.
 *
 * @param list<string> $attempts
 */
function contract_losing( string $operation, callable $forward, array &$attempts ): callable {
	return static function ( string $url, array $headers, string $body, float $timeout ) use ( $operation, $forward, &$attempts ): array {
		$response = $forward( $url, $headers, $body, $timeout );
		if ( ! str_contains( $body, $operation . '(' ) ) {
			return $response;
		}
		$attempts[] = $body;
		return 1 === count( $attempts )
			? array(
				'status' => 0,
				'body'   => '',
				'error'  => 'connection reset (answer lost on purpose)',
			)
			: $response;
	};
}
