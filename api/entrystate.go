package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"hermes/commands"
	"hermes/domain"
)

// entryStateRoutes are the per-session state Hermes' SessionEntry keeps
// for the gateway since hermes-agent d7f5acb9 (model_override, metadata),
// and the recovery of turns no gateway run holds (its active-turn
// markers). Reads fold the lane from the log, so they see every write
// that has returned.
func (s *Server) entryStateRoutes(rt routes) {
	rt.get("/sessions/{key}/model-override", withKey(s.getModelOverride))
	rt.put("/sessions/{key}/model-override", withKey(s.setModelOverride))
	rt.get("/sessions/{key}/metadata", withKey(s.getEntryMetadata))
	rt.put("/sessions/{key}/metadata/{meta_key}", withKey(s.setEntryMetadata))
	rt.post("/recovery/loose-turns", s.recoverLooseTurns)
}

// modelOverrideJSON is a model override on the wire.
type modelOverrideJSON struct {
	Model    string `json:"model,omitempty"`
	Provider string `json:"provider,omitempty"`
	BaseURL  string `json:"base_url,omitempty"`
}

type modelOverrideAnswer struct {
	SessionID     string             `json:"session_id"`
	ModelOverride *modelOverrideJSON `json:"model_override"`
}

func newModelOverrideAnswer(l domain.Lane) modelOverrideAnswer {
	out := modelOverrideAnswer{SessionID: l.SessionID}
	if o := l.ModelOverride; o != nil {
		out.ModelOverride = &modelOverrideJSON{Model: o.Model, Provider: o.Provider, BaseURL: o.BaseURL}
	}
	return out
}

func (s *Server) getModelOverride(w http.ResponseWriter, r *http.Request, key sessionKey) error {
	l, err := s.existingLane(r, key)
	if err != nil {
		return err
	}
	return respond(w, newModelOverrideAnswer(l))
}

// modelOverrideRequest is PUT /v1/sessions/{key}/model-override: the
// override, or null (or nothing) to clear it.
type modelOverrideRequest struct {
	ModelOverride *modelOverrideJSON `json:"model_override"`
}

func (q modelOverrideRequest) validate() error { return nil }

func (s *Server) setModelOverride(w http.ResponseWriter, r *http.Request, key sessionKey) error {
	req, err := decode[modelOverrideRequest](r, false)
	if err != nil {
		return err
	}
	var o *domain.ModelOverride
	if m := req.ModelOverride; m != nil {
		o = &domain.ModelOverride{Model: m.Model, Provider: m.Provider, BaseURL: m.BaseURL}
	}
	res, err := s.Commands.SetModelOverride(r.Context(), commands.SetModelOverride{Key: string(key), Override: o, CommandID: commandID(r)})
	return s.laneDone(w, res, err)
}

type entryMetadataAnswer struct {
	SessionID string                     `json:"session_id"`
	Metadata  map[string]json.RawMessage `json:"metadata"`
}

func newEntryMetadataAnswer(l domain.Lane) entryMetadataAnswer {
	out := entryMetadataAnswer{SessionID: l.SessionID, Metadata: make(map[string]json.RawMessage, len(l.Metadata))}
	for _, it := range l.Metadata {
		out.Metadata[it.Key] = it.Value
	}
	return out
}

func (s *Server) getEntryMetadata(w http.ResponseWriter, r *http.Request, key sessionKey) error {
	l, err := s.existingLane(r, key)
	if err != nil {
		return err
	}
	return respond(w, newEntryMetadataAnswer(l))
}

// entryMetadataRequest is PUT /v1/sessions/{key}/metadata/{meta_key}:
// {"value": any JSON, null included}.
type entryMetadataRequest struct {
	Value jsontext.Value `json:"value"`
}

func (q entryMetadataRequest) validate() error {
	if len(q.Value) == 0 {
		return fmt.Errorf("%w: value is required (it may be null)", errBadRequest)
	}
	return nil
}

func (s *Server) setEntryMetadata(w http.ResponseWriter, r *http.Request, key sessionKey) error {
	metaKey, err := pathParam(r, "meta_key")
	if err != nil {
		return err
	}
	req, err := decode[entryMetadataRequest](r, false)
	if err != nil {
		return err
	}
	res, err := s.Commands.SetEntryMetadata(r.Context(), commands.SetEntryMetadata{
		Key: string(key), MetaKey: metaKey, Value: json.RawMessage(req.Value), CommandID: commandID(r),
	})
	return s.laneDone(w, res, err)
}

// existingLane is the lane of key folded from the log; 404 when it has
// no live entry.
func (s *Server) existingLane(r *http.Request, key sessionKey) (domain.Lane, error) {
	l, _, err := s.Commands.Lane(r.Context(), string(key))
	if err != nil {
		return domain.Lane{}, err
	}
	if !l.Exists() {
		return domain.Lane{}, fmt.Errorf("lane %s: %w", key, domain.ErrLaneNotFound)
	}
	return l, nil
}

// looseTurnsRequest is POST /v1/recovery/loose-turns.
type looseTurnsRequest struct {
	MaxAgeSeconds *int64 `json:"max_age_seconds"`
	Discard       bool   `json:"discard"`
}

func (q looseTurnsRequest) validate() error {
	if q.MaxAgeSeconds != nil && (*q.MaxAgeSeconds < 0 || *q.MaxAgeSeconds > maxSweepAge) {
		return fmt.Errorf("%w: max_age_seconds must be between 0 and ten years", errBadRequest)
	}
	return nil
}

func (s *Server) recoverLooseTurns(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[looseTurnsRequest](r, true)
	if err != nil {
		return err
	}
	// The open turns are listed from the read model.
	if err := s.fresh(r.Context()); err != nil {
		return err
	}
	var maxAge time.Duration
	if req.MaxAgeSeconds != nil {
		maxAge = time.Duration(*req.MaxAgeSeconds) * time.Second
	}
	out, err := s.Commands.RecoverLooseTurns(r.Context(), runIndex{s}, commands.RecoverLooseTurns{
		MaxAge: maxAge, Discard: req.Discard, CommandID: commandID(r),
	})
	if err != nil {
		return err
	}
	s.afterSweep(r)
	return respond(w, struct {
		Resumed []string `json:"resumed"`
		Closed  []string `json:"closed"`
	}{nonNil(out.Resumed), nonNil(out.Closed)})
}
