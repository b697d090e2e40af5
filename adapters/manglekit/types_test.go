package convograph

import (
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
