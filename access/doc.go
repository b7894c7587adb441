// Package access decides who a caller is and which arrays it may reach.
//
// It owns the credentials a deployment can use, alone or together:
//   - bearer tokens from a tokens file (one line per token: the token, its
//     access "rw" or "ro", an optional name for the logs, and any number of
//     "prefix=PATH" fields that limit it to arrays whose path starts with
//     one of them), re-read on Reload (SIGHUP in flightd);
//   - HTTP Basic credentials as ADBC, the Flight SQL JDBC driver and
//     pyarrow send them (base64 padded or not): the password is the token,
//     the user name is logged;
//   - JWTs signed by a key of a JWKS file (RS256, ES256, EdDSA), checked
//     for expiry, issuer and audience, whose claims tileflight_access and
//     tileflight_prefixes say what they allow;
//   - client certificates (mTLS), whose subject CN names the peer.
//
// The gRPC interceptors of this package put a Principal on each call's
// context; the services ask it whether an array is within reach (Reaches)
// and whether the caller may write. An array outside a caller's reach is
// answered as if it did not exist, which is the services' business: this
// package only answers the question. It imports nothing of the engine.
package access
