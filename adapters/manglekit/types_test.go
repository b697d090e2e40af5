package convograph

import (
	"bytes"
	"encoding/json"
	"testing"
)

// The Go types hold every key of the seed document (decoding refuses unknown keys) and
// give it back unchanged in meaning, numbers beyond float64 included.
func TestTheTypesKeepEveryKeyOfTheDocument(t *testing.T) {
	doc := seedDocument(t, "s-types")
	state := seedState(t, "s-types")
	encoded, err := json.Marshal(state)
	if err != nil {
		t.Fatal(err)
	}
	assertSameMeaning(t, encoded, doc)

	if state.ActiveEnvelope.ContentType != ContentTypeJSON || state.AuditRecords[0].Outcome != OutcomeProceed {
		t.Errorf("content type %q, outcome %q", state.ActiveEnvelope.ContentType, state.AuditRecords[0].Outcome)
	}
	rule := state.AuditRecords[0].Rules[0]
	if rule.RuleName != "allow_refund" || rule.Bindings["T"] != "1003" || rule.SourceFile != "policies/refund.dl" {
		t.Errorf("rule %#v", rule)
	}
	var data struct {
		Ticket struct {
			Amount json.Number `json:"amount"`
		} `json:"ticket"`
	}
	if err := json.Unmarshal(state.ActiveEnvelope.Data, &data); err != nil {
		t.Fatal(err)
	}
	if data.Ticket.Amount != "12345678901234567890" {
		t.Errorf("amount %s", data.Ticket.Amount)
	}
}

// Metadata is free-form (map[string]any, as Manglekit's own): its numbers, beyond float64's
// precision too, come back as they were after a decode and an encode.
func TestMetadataNumbersRoundTripExactly(t *testing.T) {
	doc := []byte(`{"id":"e","metadata":{"big":12345678901234567890,"tiny":0.1000000000000000055511151231257827,"n":-0.0,"s":"x","nested":{"k":[1e400]}}}`)
	var envelope Envelope
	if err := json.Unmarshal(doc, &envelope); err != nil {
		t.Fatal(err)
	}
	if got, ok := envelope.Metadata["big"].(json.Number); !ok || got != "12345678901234567890" {
		t.Errorf("metadata big: %#v", envelope.Metadata["big"])
	}
	again, err := json.Marshal(envelope)
	if err != nil {
		t.Fatal(err)
	}
	want := `"metadata":{"big":12345678901234567890,"n":-0.0,"nested":{"k":[1e400]},"s":"x","tiny":0.1000000000000000055511151231257827}`
	if !bytes.Contains(again, []byte(want)) {
		t.Errorf("encoded again: %s\nwant it to hold %s", again, want)
	}
}
