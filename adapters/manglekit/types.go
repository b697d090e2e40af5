package convograph

import (
	"bytes"
	"encoding/json"
)

// The shapes of Manglekit's checkpoint document (core.SessionState and what it holds),
// with the JSON keys Manglekit writes. Get returns the stored document as []byte; these
// types are for callers (and tests) that want to build or read it typed.
//
// Free-form values are json.RawMessage, so that a document decoded into these types and
// encoded again keeps them exactly (numbers beyond float64's precision included).

// Reflect outcomes, as recorded in AuditRecord.Outcome. Only a PROCEED state is ever
// checkpointed: Set always stores its state with the outcome PROCEED.
const (
	OutcomeProceed = "PROCEED"
	OutcomeHalt    = "HALT"
	OutcomeRetry   = "RETRY"
	OutcomeRoute   = "ROUTE"
)

// Envelope content types (Envelope.ContentType).
const (
	ContentTypeStruct = "STRUCT"
	ContentTypeJSON   = "JSON"
)

// SessionState is everything Manglekit needs to resume a session.
type SessionState struct {
	SessionID      string           `json:"session_id"`
	ActiveEnvelope Envelope         `json:"active_envelope"`
	ExecutionCtx   ExecutionContext `json:"execution_context"`
	// LogicalFacts are the Datalog facts of the last successful reflection; Hydrate
	// re-primes the engine with them.
	LogicalFacts []string `json:"logical_facts,omitempty"`
	// PayloadType is the Go type name of the envelope's payload, for reconstruction.
	PayloadType string `json:"payload_type,omitempty"`
	// AuditRecords is the governance trail. Manglekit's own backend keeps only the last
	// checkpoint's; convograph keeps every version's (sessionStateHistory).
	AuditRecords []AuditRecord `json:"audit_records,omitempty"`
}

// Envelope is Manglekit's unit of data exchange (core.Envelope).
type Envelope struct {
	// ID is a canonical UUID string; Manglekit refuses the all-zero UUID.
	ID string `json:"id"`
	// Data is the payload, any JSON value.
	Data     json.RawMessage `json:"data,omitempty"`
	Metadata Metadata        `json:"metadata,omitempty"`
	// Error is a Go error value as encoding/json wrote it (usually {}).
	Error          json.RawMessage `json:"error,omitempty"`
	SecurityLabels []string        `json:"security_labels,omitempty"`
	Facts          []string        `json:"facts,omitempty"`
	// ContentType is ContentTypeStruct or ContentTypeJSON.
	ContentType  string      `json:"content_type,omitempty"`
	ContextFacts []string    `json:"context_facts,omitempty"`
	Violations   []Violation `json:"violations,omitempty"`
}

// Metadata is an envelope's free-form metadata, as Manglekit's own map[string]any. Its
// numbers are decoded as json.Number, so that it is encoded again as it was read: decoded
// as float64, as encoding/json decodes any number into an interface value,
// 12345678901234567890 came back rounded.
type Metadata map[string]any

// UnmarshalJSON decodes the object with its numbers as json.Number.
func (m *Metadata) UnmarshalJSON(data []byte) error {
	decoder := json.NewDecoder(bytes.NewReader(data))
	decoder.UseNumber()
	var decoded map[string]any
	if err := decoder.Decode(&decoded); err != nil {
		return err
	}
	*m = decoded
	return nil
}

// Violation is one policy violation recorded on an envelope.
type Violation struct {
	RuleID      string `json:"rule_id"`
	Description string `json:"description"`
	Severity    string `json:"severity"`
}

// ExecutionContext is the loop's retry and feedback state.
type ExecutionContext struct {
	RetryCount      int       `json:"retry_count"`
	FeedbackHistory []string  `json:"feedback_history"`
	CurrentHistory  []Message `json:"current_history"`
}

// Message is one conversation turn (core.Message).
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// AuditRecord is one step's governance decision.
type AuditRecord struct {
	Step         int            `json:"step"`
	Rules        []RuleSnapshot `json:"rules"`
	Outcome      string         `json:"outcome"`
	Timestamp    string         `json:"timestamp"`
	LatencyMs    int64          `json:"latency_ms"`
	FactCount    int            `json:"fact_count"`
	MatchedCount int            `json:"matched_count"`
}

// RuleSnapshot is one rule that matched in a step.
type RuleSnapshot struct {
	RuleName   string            `json:"rule_name"`
	Tier       string            `json:"tier"`
	Definition string            `json:"definition,omitempty"`
	SourceFile string            `json:"source_file,omitempty"`
	Predicate  string            `json:"predicate,omitempty"`
	Bindings   map[string]string `json:"bindings,omitempty"`
}
