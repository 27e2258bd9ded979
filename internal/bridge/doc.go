// Package bridge relays requests for input between an upstream and the
// client a call is for, across the protocol revisions.
//
// A 2025-11-25 upstream asks its client for input (elicitation/create,
// sampling/createMessage, roots/list) with a JSON-RPC request on the
// response stream of the call in progress, and waits for the answer. The
// gateway announces those client capabilities upstream and, for each such
// request:
//
//   - a session client that declared the capability gets the request on its
//     own response stream, under an id naming the upstream (forwardedID);
//     its answer, POSTed to any replica, is sent back to the upstream on the
//     upstream session of the client's session;
//   - a 2026-07-28 client gets an input_required result instead (2026-07-28
//     basic/patterns/mrtr). The upstream call stays open: a goroutine, the
//     pump, goes on reading its stream and posts what comes next (the final
//     response, or the next request for input) to the store's mailbox. The
//     requestState handed to the client is a random handle on a state kept
//     in the mailbox too (who asked, for which call, which upstream request
//     each inputRequests key answers), taken once. The client's retry, on
//     any replica, sends the inputResponses upstream as the answers and
//     takes the pump's next message from the mailbox.
//   - anyone else gets the request refused with -32601, at once: an
//     upstream never waits for an answer that cannot come.
//
// The upstream's timeout bounds the whole exchange, parked time included.
//
// 2026-07-28 upstreams ask with input_required themselves. A 2026-07-28
// client's retry then passes through untouched, requestState and all. A
// session client gets each of the inputRequests as a request on its call's
// stream, under an id naming a mailbox (askedID); its answers, POSTed to
// any replica, are posted there; once all are in, the gateway retries the
// upstream call with them as inputResponses and the upstream's
// requestState.
//
// Only answers the gateway asked for reach a mailbox. Before a request
// goes to the client, a marker is posted under a key naming the request
// and the client's session, holding the principal and the deadline, for
// the time the call has left. An answer takes its marker (once, without
// waiting) and is posted only if there was one, for the same principal;
// anything else (an id the gateway never sent, an answer from another
// session or principal, a second answer to the same request, one after
// the call gave up) is dropped and counted as unsolicited_answer. The
// client still gets 202: the answer is a well-formed JSON-RPC response,
// and what the gateway makes of it is not the client's to learn
// (2025-11-25 basic/transports, "Sending Messages to the Server" 4), so a
// foreign or stale request looks the same as one that never was.
//
// It owns the mailbox protocol (keys, markers, states, pumps) and the
// goroutines of parked calls, which its Owner waits for. It must not route
// or relay anything else: a call reaches it through dispatch's relay, with
// the upstream and the client's answer stream as small interfaces.
package bridge
