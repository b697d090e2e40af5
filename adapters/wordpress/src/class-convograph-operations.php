<?php
/**
 * The GraphQL documents the store sends, one per store method (see README.md's table).
 *
 * @package Convograph
 */

declare( strict_types=1 );

final class Convograph_Operations {

	private const ERRORS = 'userErrors { code message field }';

	public const VIEWER = 'query ConvographViewer { viewer { workspace { key } } }';

	public const CREATE = 'mutation ConvographCreateSession($input: CreateConversationInput!) {
		createConversation(input: $input) { conversation { id } ' . self::ERRORS . ' } }';

	public const GET = 'query ConvographGetSession($id: ID!) {
		conversation(id: $id) { ' . Convograph_Session_Rows::FIELDS . ' transcript } }';

	/** What update_session must carry over from the stored metadata (see keeping_token_id). */
	public const GET_METADATA = 'query ConvographGetSessionMetadata($id: ID!) { conversation(id: $id) { metadata } }';

	public const LIST = 'query ConvographListSessions($filter: ConversationFilter, $first: Int, $after: String) {
		conversations(filter: $filter, first: $first, after: $after) {
			nodes { ' . Convograph_Session_Rows::FIELDS . ' } pageInfo { hasNextPage endCursor } } }';

	public const LIST_WITH_MESSAGES = 'query ConvographListSessionsWithMessages($filter: ConversationFilter, $first: Int, $after: String) {
		conversations(filter: $filter, first: $first, after: $after) {
			nodes { ' . Convograph_Session_Rows::FIELDS . ' transcript } pageInfo { hasNextPage endCursor } } }';

	/** Only the ids and the cursor: the rows an `offset` skips are counted and paged through, not loaded. */
	public const SKIP_PAGE = 'query ConvographSkipSessions($filter: ConversationFilter, $first: Int, $after: String) {
		conversations(filter: $filter, first: $first, after: $after) { nodes { id } pageInfo { hasNextPage endCursor } } }';

	public const RECENT_PENDING = 'query ConvographRecentPendingSession($seconds: Int!, $context: String!, $tokenId: ID) {
		recentPendingConversation(withinSeconds: $seconds, context: $context, tokenId: $tokenId) {
			' . Convograph_Session_Rows::FIELDS . ' transcript } }';

	public const REPLACE_TRANSCRIPT = 'mutation ConvographUpdateSession($input: ReplaceTranscriptInput!) {
		replaceTranscript(input: $input) { conversation { id version } ' . self::ERRORS . ' } }';

	/** After a CONFLICT on a retried update_session: did the lost first attempt land? */
	public const GET_SAVED = 'query ConvographGetSessionSaved($id: ID!) {
		conversation(id: $id) { version transcript metadata provider model providerResponseId } }';

	/** After a CONFLICT on a retried conditional update_title: did the lost first attempt land? */
	public const GET_TITLE = 'query ConvographGetSessionTitle($id: ID!) { conversation(id: $id) { version title } }';

	public const UPDATE_TITLE = 'mutation ConvographUpdateTitle($input: UpdateConversationInput!) {
		updateConversation(input: $input) { conversation { id version } ' . self::ERRORS . ' } }';

	public const DELETE = 'mutation ConvographDeleteSession($input: DeleteConversationInput!) {
		deleteConversation(input: $input) { deleted ' . self::ERRORS . ' } }';

	public const ACQUIRE_LOCK = 'mutation ConvographAcquireLock($input: AcquireLockInput!) {
		acquireLock(input: $input) { token expiresAt ' . self::ERRORS . ' } }';

	public const RELEASE_LOCK = 'mutation ConvographReleaseLock($input: ReleaseLockInput!) {
		releaseLock(input: $input) { released ' . self::ERRORS . ' } }';
}
