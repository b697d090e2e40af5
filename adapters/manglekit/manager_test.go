package convograph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// stateProvider is core.StateProvider's method set.
type stateProvider interface {
	Get(ctx context.Context, sessionID string) (any, error)
	Set(ctx context.Context, sessionID string, state any) error
	Delete(ctx context.Context, sessionID string) error
	Close(ctx context.Context) error
}

// durableStateManager calls a provider as Manglekit's DurableStateManager does:
// Checkpoint validates and marshals the state and calls Set with the []byte; Hydrate
// calls Get, treats an untyped nil as a first run and accepts []byte, string or a
// SessionState; Delete calls Delete.
type durableStateManager struct{ provider stateProvider }

const zeroUUID = "00000000-0000-0000-0000-000000000000"

func (m *durableStateManager) Checkpoint(ctx context.Context, state *SessionState) error {
	if state == nil {
		return errors.New("checkpoint: nil state")
	}
	if state.SessionID == "" {
		return errors.New("checkpoint: session_id cannot be empty")
	}
	if state.ActiveEnvelope.ID == "" || state.ActiveEnvelope.ID == zeroUUID {
		return errors.New("checkpoint: active_envelope must have a valid ID")
	}
	data, err := json.Marshal(state)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return m.provider.Set(ctx, state.SessionID, data)
}

func (m *durableStateManager) Hydrate(ctx context.Context, sessionID string) (*SessionState, error) {
	raw, err := m.provider.Get(ctx, sessionID)
	if err != nil {
		return nil, fmt.Errorf("hydrate: %w", err)
	}
	if raw == nil {
		return nil, nil // first run
	}
	var state SessionState
	switch v := raw.(type) {
	case []byte:
		err = json.Unmarshal(v, &state)
	case string:
		err = json.Unmarshal([]byte(v), &state)
	case SessionState:
		state = v
	case *SessionState:
		state = *v
	default:
		err = fmt.Errorf("unsupported state type %T", raw)
	}
	if err != nil {
		return nil, fmt.Errorf("hydrate: %w", err)
	}
	return &state, nil
}

func (m *durableStateManager) Delete(ctx context.Context, sessionID string) error {
	return m.provider.Delete(ctx, sessionID)
}
