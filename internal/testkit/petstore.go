package testkit

import (
	"bytes"
	"cmp"
	_ "embed"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

// petStoreDocument is the OpenAPI 3.1 document of a [PetStore].
//
//go:embed petstore.openapi.json
var petStoreDocument []byte

const (
	// petStoreAPIPath is the path of the API under the server, as the
	// document's servers[0].url says.
	petStoreAPIPath = "/api/v1"
	// petStoreMaxPets bounds the pets a PetStore keeps: createPet answers
	// 507 beyond it.
	petStoreMaxPets = 1000
	// petStoreMaxRequests bounds the requests a PetStore remembers; later
	// ones are answered but not remembered.
	petStoreMaxRequests = 10000
	// petStoreMaxBody bounds a request body; a longer one gets 413.
	petStoreMaxBody = 1 << 20
)

// PetStoreOptions configures a [PetStore]. The zero value is valid: the
// store then refuses every bearer token (deletePet) and every API key
// (whoAmI).
type PetStoreOptions struct {
	// JWKSURL, if not empty, makes deletePet accept JWT access tokens
	// (typ at+jwt) signed by a key published there, unexpired, with the
	// Issuer and Audience below. [IDP.JWKSURL], typically. If empty,
	// deletePet answers 401 to every request.
	JWKSURL string
	// Issuer is the iss the JWTs must have; empty: not checked.
	Issuer string
	// Audience is a value the JWTs' aud must contain; empty: the API's base
	// URL ([PetStore.URL]).
	Audience string
	// APIKeys maps the X-Api-Key values whoAmI accepts to the names of the
	// tenants they belong to.
	APIKeys map[string]string
}

// A PetStoreRequest is a request a [PetStore] received on its API (the
// document's fetches are not remembered).
type PetStoreRequest struct {
	Method string
	// Path is the path as received, escaped: "/api/v1/echo/a%2Fb".
	Path string
	// Query is the raw query, without the "?".
	Query string
	// Authorization reports whether the request had an Authorization
	// header (whatever its value).
	Authorization bool
	// APIKey is the X-Api-Key header, and Tenant the tenant PetStoreOptions.APIKeys
	// maps it to ("" if none).
	APIKey string
	Tenant string
	// Header holds the request's headers but Authorization.
	Header http.Header
	// Body is the request body, up to 1 MiB.
	Body []byte
}

// A PetStore is a REST API on 127.0.0.1 (httptest) described by a real
// OpenAPI 3.1.0 document, for the end-to-end tests of the gateway's openapi
// upstreams. The document (Document, the embedded petstore.openapi.json) is
// served at DocumentURL (/openapi.json) and names a relative server,
// /api/v1, so that it resolves against the document's URL to URL.
//
// Its operations, under URL:
//
//	listPets   GET    /pets           query limit (1 to 100), tag (repeated), status (available|sold)
//	createPet  POST   /pets           JSON body {"name", "tag"?}; 201 with the Pet
//	getPet     GET    /pets/{petId}   404 {"code":404,"message":"pet not found"}
//	deletePet  DELETE /pets/{petId}   needs a bearer JWT (see PetStoreOptions); 204
//	whoAmI     GET    /whoami         needs X-Api-Key; {"tenant", "authorization": "bearer"|"none"}
//	echo       POST   /echo/{word}    query n, header X-Trace-Note, JSON object body;
//	                                  {"word", "rawPath", "n", "note", "body"}
//	failPet    GET    /fail           always 500, text/plain, over 5 KiB
//	search     GET    /search         query q (required); text/plain "results for <q>"
//	(none)     GET    /health         {"ok":true}; it has no operationId
//
// Errors are JSON {"code": <status>, "message": ...}, but those of failPet
// and of the server's own routing (404 of an unknown path, 405).
//
// The store starts with the pets "1", "2" and "3", and holds at most 1,000.
//
// All methods are safe for concurrent use.
type PetStore struct {
	URL         string // the API's base URL: http://127.0.0.1:PORT/api/v1
	DocumentURL string // http://127.0.0.1:PORT/openapi.json
	Document    []byte // the OpenAPI 3.1.0 JSON document

	opts PetStoreOptions
	jwt  *accessTokenChecker

	mu       sync.Mutex
	pets     map[string]petStorePet // by id
	nextID   int
	requests []PetStoreRequest
}

// petStorePet is a Pet of the document.
type petStorePet struct {
	ID     string         `json:"id"`
	Name   string         `json:"name"`
	Tag    *string        `json:"tag"`
	Tags   []string       `json:"tags"`
	Status string         `json:"status"`
	Owner  *petStoreOwner `json:"owner,omitempty"`
}

type petStoreOwner struct {
	Name  string  `json:"name"`
	Email *string `json:"email"`
}

// petStoreError is an Error of the document.
type petStoreError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// petStoreFailure is the body of failPet's 500: the message, then 5 KiB of
// filler, so that tests can see how much of an error body the gateway
// passes on.
var petStoreFailure = "internal failure: database on fire\n" +
	strings.Repeat("lorem ipsum dolor sit amet, consectetur adipiscing elit, filler\n", 80)

// StartPetStore starts a PetStore configured by opts, stopped at the end of
// the test.
func StartPetStore(t testing.TB, opts PetStoreOptions) *PetStore {
	t.Helper()
	s := &PetStore{
		Document: slices.Clone(petStoreDocument),
		opts:     opts,
	}
	s.seed()

	api := http.NewServeMux()
	api.HandleFunc("GET "+petStoreAPIPath+"/pets", s.listPets)
	api.HandleFunc("POST "+petStoreAPIPath+"/pets", s.createPet)
	api.HandleFunc("GET "+petStoreAPIPath+"/pets/{petId}", s.getPet)
	api.HandleFunc("DELETE "+petStoreAPIPath+"/pets/{petId}", s.deletePet)
	api.HandleFunc("GET "+petStoreAPIPath+"/whoami", s.whoAmI)
	api.HandleFunc("POST "+petStoreAPIPath+"/echo/{word}", s.echo)
	api.HandleFunc("GET "+petStoreAPIPath+"/fail", s.fail)
	api.HandleFunc("GET "+petStoreAPIPath+"/search", s.search)
	api.HandleFunc("GET "+petStoreAPIPath+"/health", func(w http.ResponseWriter, _ *http.Request) {
		writePetStoreJSON(w, http.StatusOK, map[string]bool{"ok": true})
	})

	mux := http.NewServeMux()
	mux.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(petStoreDocument)
	})
	mux.Handle(petStoreAPIPath+"/", s.record(api))

	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	s.URL = srv.URL + petStoreAPIPath
	s.DocumentURL = srv.URL + "/openapi.json"
	audience := opts.Audience
	if audience == "" {
		audience = s.URL
	}
	s.jwt = newAccessTokenChecker(opts.JWKSURL, opts.Issuer, audience)
	return s
}

// Requests returns a copy of the requests the API received since the start
// or the last [PetStore.Reset], in the order they arrived; at most the
// first 10,000.
func (s *PetStore) Requests() []PetStoreRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]PetStoreRequest, len(s.requests))
	for i, r := range s.requests {
		r.Header = r.Header.Clone()
		r.Body = slices.Clone(r.Body)
		out[i] = r
	}
	return out
}

// Reset forgets the requests received so far. The pets stay as they are.
func (s *PetStore) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
}

// seed fills the store with its three pets: one of each status, one
// without a tag, one whose owner has a null email.
func (s *PetStore) seed() {
	dog, cat := "dog", "cat"
	email := "ada@example.com"
	s.pets = map[string]petStorePet{
		"1": {ID: "1", Name: "Rex", Tag: &dog, Tags: []string{"dog", "good"}, Status: "available"},
		"2": {ID: "2", Name: "Tom", Tag: &cat, Tags: []string{"cat"}, Status: "sold",
			Owner: &petStoreOwner{Name: "Ada", Email: &email}},
		"3": {ID: "3", Name: "Nemo", Tags: []string{}, Status: "sold",
			Owner: &petStoreOwner{Name: "Bob"}},
	}
	s.nextID = 4
}

// record remembers each request, its body read (up to petStoreMaxBody)
// before next sees it.
func (s *PetStore) record(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, petStoreMaxBody))
		key := r.Header.Get("X-Api-Key")
		rec := PetStoreRequest{
			Method:        r.Method,
			Path:          rawRequestPath(r),
			Query:         r.URL.RawQuery,
			Authorization: len(r.Header.Values("Authorization")) > 0,
			APIKey:        key,
			Tenant:        s.tenantOf(key),
			Header:        r.Header.Clone(),
			Body:          body,
		}
		rec.Header.Del("Authorization")
		s.mu.Lock()
		if len(s.requests) < petStoreMaxRequests {
			s.requests = append(s.requests, rec)
		}
		s.mu.Unlock()
		if err != nil {
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				writePetStoreError(w, http.StatusRequestEntityTooLarge, "the body is over 1 MiB")
				return
			}
			writePetStoreError(w, http.StatusBadRequest, "cannot read the body: "+err.Error())
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

// rawRequestPath returns the path of r as the client sent it, escaped: the
// request target up to "?" (RawPath is set only when the escaping is not
// the default one).
func rawRequestPath(r *http.Request) string {
	if p, _, _ := strings.Cut(r.RequestURI, "?"); strings.HasPrefix(p, "/") {
		return p
	}
	return r.URL.EscapedPath()
}

// tenantOf returns the tenant of an API key, or "".
func (s *PetStore) tenantOf(key string) string {
	if key == "" {
		return ""
	}
	return s.opts.APIKeys[key]
}

func (s *PetStore) listPets(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := -1
	if q.Has("limit") {
		n, err := strconv.Atoi(q.Get("limit"))
		if err != nil || n < 1 || n > 100 {
			writePetStoreError(w, http.StatusBadRequest, "limit must be an integer from 1 to 100")
			return
		}
		limit = n
	}
	status := q.Get("status")
	if q.Has("status") && status != "available" && status != "sold" {
		writePetStoreError(w, http.StatusBadRequest, "status must be available or sold")
		return
	}
	tags := q["tag"]

	s.mu.Lock()
	var pets []petStorePet
	for _, p := range s.pets {
		if status != "" && p.Status != status {
			continue
		}
		if len(tags) > 0 && !slices.ContainsFunc(p.Tags, func(tag string) bool { return slices.Contains(tags, tag) }) {
			continue
		}
		pets = append(pets, p)
	}
	s.mu.Unlock()

	// Ids are decimal numbers without leading zeros: shorter is smaller.
	slices.SortFunc(pets, func(a, b petStorePet) int {
		return cmp.Or(cmp.Compare(len(a.ID), len(b.ID)), strings.Compare(a.ID, b.ID))
	})
	total := len(pets)
	if limit >= 0 && len(pets) > limit {
		pets = pets[:limit]
	}
	if pets == nil {
		pets = []petStorePet{}
	}
	writePetStoreJSON(w, http.StatusOK, map[string]any{"pets": pets, "total": total})
}

func (s *PetStore) createPet(w http.ResponseWriter, r *http.Request) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writePetStoreError(w, http.StatusBadRequest, "the body must be application/json")
		return
	}
	var in struct {
		Name *string `json:"name"`
		Tag  *string `json:"tag"`
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		writePetStoreError(w, http.StatusBadRequest, "bad body: "+err.Error())
		return
	}
	if _, err := dec.Token(); err != io.EOF {
		writePetStoreError(w, http.StatusBadRequest, "bad body: data after the JSON object")
		return
	}
	switch {
	case in.Name == nil:
		writePetStoreError(w, http.StatusBadRequest, "name is required")
		return
	case *in.Name == "" || utf8.RuneCountInString(*in.Name) > 100:
		writePetStoreError(w, http.StatusBadRequest, "name must have 1 to 100 characters")
		return
	case in.Tag != nil && utf8.RuneCountInString(*in.Tag) > 50:
		writePetStoreError(w, http.StatusBadRequest, "tag must have at most 50 characters")
		return
	}
	p := petStorePet{Name: *in.Name, Tag: in.Tag, Tags: []string{}, Status: "available"}
	if in.Tag != nil {
		p.Tags = []string{*in.Tag}
	}

	s.mu.Lock()
	if len(s.pets) >= petStoreMaxPets {
		s.mu.Unlock()
		writePetStoreError(w, http.StatusInsufficientStorage, "the store is full")
		return
	}
	p.ID = strconv.Itoa(s.nextID)
	s.nextID++
	s.pets[p.ID] = p
	s.mu.Unlock()

	w.Header().Set("Location", s.URL+"/pets/"+p.ID)
	writePetStoreJSON(w, http.StatusCreated, p)
}

func (s *PetStore) getPet(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	p, ok := s.pets[r.PathValue("petId")]
	s.mu.Unlock()
	if !ok {
		writePetStoreError(w, http.StatusNotFound, "pet not found")
		return
	}
	writePetStoreJSON(w, http.StatusOK, p)
}

func (s *PetStore) deletePet(w http.ResponseWriter, r *http.Request) {
	fields := strings.Fields(r.Header.Get("Authorization"))
	if len(fields) != 2 || !strings.EqualFold(fields[0], "bearer") {
		w.Header().Set("WWW-Authenticate", "Bearer")
		writePetStoreError(w, http.StatusUnauthorized, "a bearer token is required")
		return
	}
	if _, err := s.jwt.check(r.Context(), fields[1]); err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		writePetStoreError(w, http.StatusUnauthorized, err.Error())
		return
	}
	id := r.PathValue("petId")
	s.mu.Lock()
	_, ok := s.pets[id]
	delete(s.pets, id)
	s.mu.Unlock()
	if !ok {
		writePetStoreError(w, http.StatusNotFound, "pet not found")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *PetStore) whoAmI(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("X-Api-Key")
	tenant, ok := s.opts.APIKeys[key]
	if key == "" || !ok {
		writePetStoreError(w, http.StatusUnauthorized, "a known X-Api-Key is required")
		return
	}
	authorization := "none"
	if len(r.Header.Values("Authorization")) > 0 {
		authorization = "bearer"
	}
	writePetStoreJSON(w, http.StatusOK, map[string]string{"tenant": tenant, "authorization": authorization})
}

func (s *PetStore) echo(w http.ResponseWriter, r *http.Request) {
	out := struct {
		Word    string          `json:"word"`
		RawPath string          `json:"rawPath"`
		N       *int64          `json:"n"`
		Note    *string         `json:"note"`
		Body    json.RawMessage `json:"body"`
	}{
		Word:    r.PathValue("word"),
		RawPath: rawRequestPath(r),
	}
	if q := r.URL.Query(); q.Has("n") {
		n, err := strconv.ParseInt(q.Get("n"), 10, 64)
		if err != nil {
			writePetStoreError(w, http.StatusBadRequest, "n must be an integer")
			return
		}
		out.N = &n
	}
	if notes := r.Header.Values("X-Trace-Note"); len(notes) > 0 {
		out.Note = &notes[0]
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writePetStoreError(w, http.StatusBadRequest, "cannot read the body: "+err.Error())
		return
	}
	if len(bytes.TrimSpace(body)) > 0 {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(body, &obj); err != nil || obj == nil {
			writePetStoreError(w, http.StatusBadRequest, "the body must be a JSON object")
			return
		}
		out.Body = body
	}
	writePetStoreJSON(w, http.StatusOK, out)
}

func (s *PetStore) fail(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusInternalServerError)
	io.WriteString(w, petStoreFailure)
}

func (s *PetStore) search(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if !q.Has("q") {
		writePetStoreError(w, http.StatusBadRequest, "q is required")
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, "results for "+q.Get("q"))
}

// writePetStoreJSON writes v as the JSON body of a status response.
func writePetStoreJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(data)
}

// writePetStoreError writes an Error of the document.
func writePetStoreError(w http.ResponseWriter, status int, message string) {
	writePetStoreJSON(w, status, petStoreError{Code: status, Message: message})
}
