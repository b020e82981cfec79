// Generated from the service's OpenAPI document by test/sdk/sdk-api-types.test.ts
// (KMS_UPDATE_SDK_API=1 writes it anew). Do not edit.

export interface paths {
    "/api/v1/health": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Service health (no credential needed) */
        get: operations["getHealth"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/tenant": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The tenant this request acts on, and who is calling */
        get: operations["getCurrentTenant"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/api-keys": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List the tenant's API keys */
        get: operations["listApiKeys"];
        put?: never;
        /** Create an API key (the key is returned once, only here) */
        post: operations["createApiKey"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/api-keys/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Get one API key */
        get: operations["getApiKey"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/api-keys/{id}/revoke": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Revoke an API key and every key it created, transitively (irreversible; effective on every process within a second). The caller must hold every scope of the key. */
        post: operations["revokeApiKey"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/audit": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * List the tenant's audit records, newest first
         * @description Cursor pagination: pass `nextCursor` back as `cursor` until it is null.
         */
        get: operations["listAuditRecords"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/keys": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List keys: favourites first, then by the sort column; keyset pagination */
        get: operations["listKeys"];
        put?: never;
        /** Generate a key (Active at once, public key available at once) */
        post: operations["createKey"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/keys/import": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Import a private key (BYOK; the material is sealed before the response), or a public key alone (publicOnly) */
        post: operations["importKey"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/keys/{keyId}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Get a key */
        get: operations["getKey"];
        put?: never;
        post?: never;
        /** Schedule deletion (Pending Deletion; destroyed after the window) */
        delete: operations["scheduleKeyDeletion"];
        options?: never;
        head?: never;
        /** Update name, description, labels, expiration, default or favourite status */
        patch: operations["updateKey"];
        trace?: never;
    };
    "/api/v1/keys/{keyId}/rotate": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Add a new version (new material, same key id) */
        post: operations["rotateKey"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/keys/{keyId}/revoke": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Revoke (irreversible; decrypt and verify still work) */
        post: operations["revokeKey"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/keys/{keyId}/cancel-deletion": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Cancel a scheduled deletion before its date */
        post: operations["cancelKeyDeletion"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/keys/{keyId}/versions": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** All versions of a key */
        get: operations["listKeyVersions"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/keys/{keyId}/public": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Export the public key (PEM, DER, RAW or JWK) */
        get: operations["getPublicKey"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/keys/{keyId}/public/download": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Download the public key as a file (.pem, .der, .txt or .json) */
        get: operations["downloadPublicKey"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/keys/{keyId}/export-private": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Export the private key: needs keys:export and a key created or imported with exportable: true; confirm repeats the key's name. Audited at warning level. */
        post: operations["exportPrivateKey"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/aliases": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The tenant's aliases in alias order, optionally of one key; keyset pagination */
        get: operations["listKeyAliases"];
        put?: never;
        /**
         * Give a key an alias (alias/<name>), usable wherever a key id is
         * @description A key may have up to 50 aliases; an alias names exactly one key of the tenant. 409 alias_exists when the tenant has it already (move it with PATCH). Names under alias/kms/ are reserved (400 alias_reserved).
         */
        post: operations["createKeyAlias"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/aliases/{alias}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** An alias and the key it names (the alias URL-encoded: alias%2F<name>) */
        get: operations["getKeyAlias"];
        put?: never;
        post?: never;
        /** Delete an alias (the key stays) */
        delete: operations["deleteKeyAlias"];
        options?: never;
        head?: never;
        /**
         * Move an alias to another key of the same key type (rotation by alias)
         * @description Callers using the alias use the new key from then on; what was encrypted or signed under the old key still decrypts or verifies by its envelope or key id. Another key type is 400 key_type_mismatch.
         */
        patch: operations["moveKeyAlias"];
        trace?: never;
    };
    "/api/v1/keys/{keyId}/rotation-policy": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The key rotation policy */
        get: operations["getRotationPolicy"];
        put?: never;
        /** Create or replace the key rotation policy (a new frequency restarts the schedule) */
        post: operations["setRotationPolicy"];
        /** Remove the key rotation policy */
        delete: operations["deleteRotationPolicy"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/keys/{keyId}/rotation-policy/pause": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Pause the policy: no rotations until resumed; the pause time is kept */
        post: operations["pauseRotationPolicy"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/keys/{keyId}/rotation-policy/resume": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Resume the policy: a rotation that fell due meanwhile happens at once */
        post: operations["resumeRotationPolicy"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/cas": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List the tenant’s CAs */
        get: operations["listCas"];
        put?: never;
        /** Create a root or intermediate CA on a key the service holds (never exported); keyId also needs keys:write */
        post: operations["createCa"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/cas/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** One CA, with its certificate and chain (or its CSR while pending) */
        get: operations["getCa"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        /** Change the CRL and issuing-certificate URLs (before the first issuance) */
        patch: operations["updateCa"];
        trace?: never;
    };
    "/api/v1/cas/{id}/certificate": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The CA’s certificate (public: the AIA caIssuers URL): DER, or PEM with format=pem */
        get: operations["getCaCertificate"];
        put?: never;
        /** Import the certificate an outside parent issued for a pending intermediate */
        post: operations["importCaCertificate"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/cas/{id}/crl": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The CA’s current CRL (public, like the web’s): DER, or PEM with format=pem */
        get: operations["getCaCrl"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/cas/{id}/ocsp": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** The CA’s OCSP responder (RFC 6960, public): a DER OCSPRequest as application/ocsp-request */
        post: operations["postCaOcsp"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/cas/{id}/ocsp/{request}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The CA’s OCSP responder (RFC 6960 Appendix A.1, public): the request in the path */
        get: operations["getCaOcsp"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/cas/{id}/roles": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The CA’s roles */
        get: operations["listCaRoles"];
        put?: never;
        /** Create a role: what the CA certifies when asked through it */
        post: operations["createCaRole"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/cas/{id}/roles/{name}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** One role */
        get: operations["getCaRole"];
        put?: never;
        post?: never;
        /** Delete a role */
        delete: operations["deleteCaRole"];
        options?: never;
        head?: never;
        /** Change a role (certificates already issued keep what they say) */
        patch: operations["updateCaRole"];
        trace?: never;
    };
    "/api/v1/certificates": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List stored certificates (by CA, status, or ending soon) */
        get: operations["listCertificates"];
        put?: never;
        /** Issue a certificate through a role: from a CSR, or with a key pair generated for it */
        post: operations["issueCertificate"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/certificates/{serial}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** One stored certificate by serial (hex) */
        get: operations["getCertificate"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/certificates/{serial}/revoke": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Revoke a certificate (the CA’s CRL is rebuilt before the answer) */
        post: operations["revokeCertificate"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/ssh/ca": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The tenant’s SSH CAs (a user CA and a host CA at most) */
        get: operations["listSshCas"];
        put?: never;
        /** Create the tenant’s user or host CA, on a new key or an existing non-exportable Signing key (keyId: also keys:write) */
        post: operations["createSshCa"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/ssh/ca/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** One SSH CA, with its public key as authorized_keys and known_hosts lines */
        get: operations["getSshCa"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        /** Change a CA’s default and maximum certificate validity */
        patch: operations["updateSshCa"];
        trace?: never;
    };
    "/api/v1/ssh/ca/{id}/public-key": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The CA’s public key as one OpenSSH line, text/plain (public: no credential) */
        get: operations["getSshCaPublicKey"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/ssh/ca/{id}/krl": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The CA’s key revocation list for sshd’s RevokedKeys, application/octet-stream (public) */
        get: operations["getSshCaKrl"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/ssh/certificates": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The certificates the tenant’s CAs issued, newest first; filters: caType, revoked, expiring */
        get: operations["listSshCertificates"];
        put?: never;
        /** Sign a public key: an OpenSSH user or host certificate from the named CA */
        post: operations["signSshCertificate"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/ssh/certificates/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** One certificate, with its -cert.pub line */
        get: operations["getSshCertificate"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/ssh/certificates/{id}/revoke": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Revoke a certificate: the CA’s KRL lists its serial until it expires */
        post: operations["revokeSshCertificate"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/cloud-connections": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The tenant’s cloud connections (without credentials) */
        get: operations["listCloudConnections"];
        put?: never;
        /**
         * Store credentials for a cloud KMS (sealed by the tenant KEK, never returned)
         * @description Needs keys:write and keys:export: a cloud connection or export sends private keys out of the service. An endpoint field other than the provider's own hosts is 400 unless the operator allowed its origin (KMS_CLOUD_EXPORT_CUSTOM_ENDPOINTS).
         */
        post: operations["createCloudConnection"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/cloud-connections/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** A cloud connection (without credentials) */
        get: operations["getCloudConnection"];
        put?: never;
        post?: never;
        /**
         * Delete a connection no export uses (409 connection_in_use otherwise)
         * @description Needs keys:write and keys:export: a cloud connection or export sends private keys out of the service.
         */
        delete: operations["deleteCloudConnection"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/cloud-connections/{id}/credentials": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        /**
         * Replace a connection’s credentials (rotation); the next push uses them
         * @description Needs keys:write and keys:export: a cloud connection or export sends private keys out of the service.
         */
        put: operations["rotateCloudCredentials"];
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/cloud-connections/{id}/test": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * One authenticated call to the cloud: do the credentials work?
         * @description Needs keys:write and keys:export: a cloud connection or export sends private keys out of the service. A failure is the answer (status failed with the cloud’s reason), not an HTTP error.
         */
        post: operations["testCloudConnection"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/keys/{keyId}/cloud-exports": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The key’s cloud exports with their sync state */
        get: operations["listCloudExports"];
        put?: never;
        /**
         * Export a key to a cloud KMS; the first push is due at once
         * @description Needs keys:write and keys:export: a cloud connection or export sends private keys out of the service. A key not created or imported with exportable: true is 409 key_not_exportable (as for export-private). Spec 2.2 decides what each provider takes: a post-quantum or HMAC key, or an algorithm the provider lacks, is 400 algorithm_not_supported naming the provider's algorithms. A vault URL other than the provider's own hosts is 400 unless the operator allowed its origin (KMS_CLOUD_EXPORT_CUSTOM_ENDPOINTS).
         */
        post: operations["createCloudExport"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/keys/{keyId}/cloud-exports/{exportId}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** A cloud export with its sync state (lastSyncAt, lastSyncVersion, lastSyncError) */
        get: operations["getCloudExport"];
        put?: never;
        post?: never;
        /** Stop exporting the key there (what the cloud holds stays: delete it there) */
        delete: operations["deleteCloudExport"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/keys/{keyId}/cloud-exports/{exportId}/sync": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Push the key’s current version now (202: the job process pushes it)
         * @description Answers 202 with the export pending; the job process pushes within one sweep (KMS_JOB_SWEEP_MS) and records lastSyncAt/lastSyncVersion or lastSyncError. Poll GET to follow it. A key not created exportable is 409 key_not_exportable, and the export is left failed with that error.
         */
        post: operations["syncCloudExport"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/insights": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Findings about the tenant’s keys: critical, warnings, information */
        get: operations["getInsights"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/keys/{keyId}/insights": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The findings that name one key */
        get: operations["getKeyInsights"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/keys/{keyId}/tag-suggestions": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Suggest labels for one key now (stored as pending) */
        post: operations["suggestKeyTags"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/tag-suggestions": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The tenant’s tag suggestions, newest first (filter by status or key) */
        get: operations["listTagSuggestions"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/tag-suggestions/{id}/accept": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Accept a pending suggestion: its label is added to the key */
        post: operations["acceptTagSuggestion"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/tag-suggestions/accept-all": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Accept every pending suggestion of the tenant (or of one key) */
        post: operations["acceptAllTagSuggestions"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/tag-suggestions/{id}/reject": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Reject a pending suggestion (the label is not suggested again) */
        post: operations["rejectTagSuggestion"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/tag-suggestions/reject-all": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Reject every pending suggestion of the tenant (or of one key) */
        post: operations["rejectAllTagSuggestions"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/tag-suggestion-jobs": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Suggest labels for every active key in the background (batches of 10)
         * @description Answers 202 with the job; poll GET /tag-suggestion-jobs/{id} for its progress.
         */
        post: operations["startTagSuggestionJob"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/tag-suggestion-jobs/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** A suggestion job’s progress */
        get: operations["getTagSuggestionJob"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/webhooks/deliveries": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Webhook deliveries of the tenant, newest first, with every attempt */
        get: operations["listWebhookDeliveries"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/webhooks/deliveries/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** One webhook delivery with every attempt */
        get: operations["getWebhookDelivery"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/webhooks/secret": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** The tenant webhook signing secret (created on first use) */
        post: operations["getWebhookSecret"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/webhooks/secret/rotate": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Replace the webhook signing secret; deliveries from now on use the new one */
        post: operations["rotateWebhookSecret"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/encrypt": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Envelope-encrypt: per-operation DEK, AES-256-GCM, DEK protected by ML-KEM or RSA-OAEP
         * @description JSON, or raw bytes with Content-Type application/octet-stream: the plaintext in, the compact envelope out (docs/envelope-format.md), the key in X-Key-Id and the context in X-Encryption-Context. Plaintexts of up to 10485760 bytes (10 MiB) in either transport: a binary body of up to 10485760 bytes, a JSON body of up to 14046552 bytes (the plaintext as Base64 is a third larger); a larger body is a 413 naming the limit.
         */
        post: operations["encrypt"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/decrypt": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Decrypt an encrypt response; any mismatch is one error, decryption_failed
         * @description JSON, or raw bytes with Content-Type application/octet-stream: the compact envelope in (what a binary encrypt returned, or a legacy-mode ciphertext decoded), the plaintext out; X-Key-Id and X-Key-Version are optional cross-checks, X-Encryption-Context the context. Envelopes of up to 10551296 bytes: a binary body of up to 10551296 bytes, a JSON body of up to 14133932 bytes.
         */
        post: operations["decrypt"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/encrypt/batch": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Encrypt up to 1,000 independent items; each result is {ok: true, ...} or {ok: false, error, message}
         * @description Or application/octet-stream: the binary batch framing of docs/envelope-format.md ("Binary batches"), answered in the same framing; it carries the items as raw bytes instead of Base64 in JSON. X-Key-Id names the key of every item of a binary batch.
         */
        post: operations["encryptBatch"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/decrypt/batch": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Decrypt up to 1,000 independent items; each result is {ok: true, ...} or {ok: false, error, message}
         * @description Or application/octet-stream: the binary batch framing of docs/envelope-format.md ("Binary batches"), answered in the same framing; it carries the items as raw bytes instead of Base64 in JSON. The envelopes name their keys.
         */
        post: operations["decryptBatch"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/sign": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Sign with a Signing key (ML-DSA, SLH-DSA, RSA, ECDSA, Ed25519) */
        post: operations["sign"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/verify": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Verify a signature: {valid: true|false} (200) whatever the signature holds */
        post: operations["verify"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/keys/{keyId}/mac": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** HMAC of the data with an HMAC key */
        post: operations["generateMac"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/keys/{keyId}/mac/verify": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Check a MAC in constant time: {valid: true|false} */
        post: operations["verifyMac"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/generate-data-key": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** A fresh 256-bit data key, in plaintext and wrapped (recover it with /keys/{keyId}/unwrap) */
        post: operations["generateDataKey"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/keys/{keyId}/data-key": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** A fresh data key of 16, 24 or 32 bytes, wrapped by this key with an optional context */
        post: operations["generateKeyDataKey"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/keys/{keyId}/wrap": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Wrap key material; unwrap needs the same context */
        post: operations["wrapKey"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/keys/{keyId}/unwrap": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Unwrap a wrapped key or an encryptedDek; any mismatch is decryption_failed */
        post: operations["unwrapKey"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/re-encrypt": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Re-encrypt an envelope under another key (or the current version), without the plaintext
         * @description The body is an answer of /encrypt (standard or legacy mode), of /keys/{keyId}/wrap (wrappedKey) or of a data-key endpoint (encryptedDek), passed as it came, with its `context` (a string or a map) and `destinationKeyId` (default: the tenant default Encryption key) and `destinationContext` (default: the same context). The answer is what /encrypt, wrap or the data-key endpoint would have answered for the destination key (so /decrypt or unwrap takes it), plus sourceKeyId and sourceKeyVersion. The plaintext never leaves the service. The source key may be in any state that decrypts (Active, Expired, Revoked, Pending Deletion); the destination must be Active. Any mismatch of the source is decryption_failed.
         */
        post: operations["reEncrypt"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/re-encrypt/batch": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Re-encrypt up to 1,000 independent items; each result is {ok: true, ...} or {ok: false, error, message}
         * @description Each item as the body of POST /re-encrypt. `destinationKeyId` of the batch applies to the items that name none; an item that cannot be read fails alone, as any other.
         */
        post: operations["reEncryptBatch"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/keys/{keyId}/raw-encrypt": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * AES-GCM encryption without an envelope, with an AES key (interoperability)
         * @description The caller gets the ciphertext, the service-drawn 12-byte IV and the tag separately, for systems that decrypt AES-GCM themselves with the same imported key. Prefer /encrypt, whose envelope names its key and version.
         */
        post: operations["rawEncrypt"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/keys/{keyId}/raw-decrypt": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * AES-GCM decryption of a ciphertext, IV, tag and AAD given apart, with an AES key
         * @description Any authentication failure (another key, IV, tag or AAD, a flipped bit) is the one 400 decryption_failed.
         */
        post: operations["rawDecrypt"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/secrets": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List secrets by name; include selects fields as for one secret */
        get: operations["listSecrets"];
        put?: never;
        /** Create a secret (version 1 of its value); answers with its metadata */
        post: operations["createSecret"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/secrets/move": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Move secrets into a folder (or the top level), all or none */
        post: operations["moveSecrets"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/secrets/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** A secret: id, name and version by default; include selects more, all the value */
        get: operations["getSecret"];
        put?: never;
        post?: never;
        /** Delete a secret: restorable for 30 days, or purged now with permanent=true */
        delete: operations["deleteSecret"];
        options?: never;
        head?: never;
        /** Change a secret; a new value becomes a new version */
        patch: operations["updateSecret"];
        trace?: never;
    };
    "/api/v1/secrets/{id}/restore": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Restore a deleted secret within 30 days of its deletion */
        post: operations["restoreSecret"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/secrets/{id}/versions": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The kept versions of the value, newest first (no values) */
        get: operations["listSecretVersions"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/secrets/{id}/versions/{version}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** One version of the value; include=all returns the value itself */
        get: operations["getSecretVersion"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/secrets/{id}/totp": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The current TOTP code of the secret (RFC 6238); audited as a value read */
        get: operations["getSecretTotp"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/folders": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List folders by path; parentId=<id> or root lists one level */
        get: operations["listFolders"];
        put?: never;
        /** Create a folder, at the top level or inside another */
        post: operations["createFolder"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/folders/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** One folder with its path */
        get: operations["getFolder"];
        put?: never;
        post?: never;
        /** Delete an empty folder */
        delete: operations["deleteFolder"];
        options?: never;
        head?: never;
        /** Rename a folder or move it under another (its secrets and subfolders move with it) */
        patch: operations["updateFolder"];
        trace?: never;
    };
    "/api/v1/me": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * The signed-in member and every tenant they belong to
         * @description A person’s access token (any tenant’s) answers with their account and memberships, so a client can learn which `urn:kms:tenant:<id>` to ask the provider for. API keys get 403: they belong to one tenant and no person.
         *
         *     Signed-in team members with the role tenant:viewer or tenant:developer or tenant:admin or tenant:owner; API keys are refused (403 forbidden).
         *
         *     Signed-in team members with the role tenant:viewer or tenant:developer or tenant:admin or tenant:owner; API keys are refused (403 forbidden).
         */
        get: operations["getMe"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/team/members": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * The tenant’s members and their roles
         * @description Signed-in team members with the role tenant:viewer or tenant:developer or tenant:admin or tenant:owner; API keys are refused (403 forbidden).
         *
         *     Signed-in team members with the role tenant:viewer or tenant:developer or tenant:admin or tenant:owner; API keys are refused (403 forbidden).
         */
        get: operations["listTeamMembers"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/team/members/{accountId}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /**
         * Remove a member: their access tokens stop working in every process at once
         * @description Signed-in team members with the role tenant:owner or tenant:admin; API keys are refused (403 forbidden).
         */
        delete: operations["removeTeamMember"];
        options?: never;
        head?: never;
        /**
         * Change a member’s role (owner role: owners only; never the last owner away)
         * @description Signed-in team members with the role tenant:owner or tenant:admin; API keys are refused (403 forbidden).
         */
        patch: operations["changeTeamMemberRole"];
        trace?: never;
    };
    "/api/v1/team/invitations": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Invitations, newest first, with their e-mail status
         * @description Signed-in team members with the role tenant:viewer or tenant:developer or tenant:admin or tenant:owner; API keys are refused (403 forbidden).
         *
         *     Signed-in team members with the role tenant:viewer or tenant:developer or tenant:admin or tenant:owner; API keys are refused (403 forbidden).
         */
        get: operations["listInvitations"];
        put?: never;
        /**
         * Invite a person by e-mail; answers once the invitation is stored (the e-mail is sent by a job)
         * @description Signed-in team members with the role tenant:owner or tenant:admin; API keys are refused (403 forbidden).
         */
        post: operations["createInvitation"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/team/invitations/{id}/resend": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Send the invitation again with a new link (the old link stops working)
         * @description Signed-in team members with the role tenant:owner or tenant:admin; API keys are refused (403 forbidden).
         */
        post: operations["resendInvitation"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/team/invitations/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /**
         * Revoke a pending invitation
         * @description Signed-in team members with the role tenant:owner or tenant:admin; API keys are refused (403 forbidden).
         */
        delete: operations["revokeInvitation"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/settings/security": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The tenant’s security settings */
        get: operations["getSecuritySettings"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        /**
         * Change security settings (MFA methods, password policy, session lifetimes, API-key policy); audited
         * @description Signed-in team members with the role tenant:owner or tenant:admin; API keys are refused (403 forbidden).
         */
        patch: operations["updateSecuritySettings"];
        trace?: never;
    };
    "/api/v1/settings/branding": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The tenant’s login panel (image, title and text per locale): the fallback of its applications */
        get: operations["getBranding"];
        /**
         * Replace the tenant’s login panel; audited with the editor
         * @description Signed-in team members with the role tenant:owner or tenant:admin; API keys are refused (403 forbidden).
         */
        put: operations["updateBranding"];
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/applications": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The tenant’s applications (OpenID clients), oldest first */
        get: operations["listApplications"];
        put?: never;
        /** Register an application; a confidential one’s secret is in this answer only */
        post: operations["createApplication"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/applications/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** One application */
        get: operations["getApplication"];
        /** Change an application: omitting resources keeps them, an empty array clears them; a read answer put back unchanged is valid */
        put: operations["updateApplication"];
        post?: never;
        /** Delete an application */
        delete: operations["deleteApplication"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/applications/{id}/rotate-secret": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** A new client secret, shown once; the old one stops working */
        post: operations["rotateApplicationSecret"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/endusers": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The tenant’s end-users, oldest first; filter by application, status, search */
        get: operations["listEndUsers"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/endusers/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** One end-user */
        get: operations["getEndUser"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/endusers/create-without-password": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Create an end-user with no password; the set-up link goes out by e-mail */
        post: operations["createEndUserWithoutPassword"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/endusers/{id}/send-password-reset": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** E-mail a password reset link (one hour, single use; older reset links stop working) */
        post: operations["sendEndUserPasswordReset"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/endusers/{id}/block": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Block: sign-in disabled and the record flagged; sessions and refresh tokens end at once (idempotent) */
        post: operations["blockEndUser"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/endusers/{id}/unblock": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Unblock: sign-in enabled again (idempotent) */
        post: operations["unblockEndUser"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/endusers/{id}/permanent": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /** Delete for good: the identity user, then the record with its applications and roles */
        delete: operations["deleteEndUserPermanently"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/roles": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Roles of the tenant’s applications, oldest first */
        get: operations["listRoles"];
        put?: never;
        /** Create a role of an application */
        post: operations["createRole"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/roles/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** One role */
        get: operations["getRole"];
        /** Replace a role’s name, description and permissions */
        put: operations["updateRole"];
        post?: never;
        /** Delete a role (its assignments go with it) */
        delete: operations["deleteRole"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/endusers/{id}/roles": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The roles an end-user holds, in every application */
        get: operations["listEndUserRoles"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/endusers/{id}/roles/{roleId}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        /** Assign a role to an end-user (idempotent); answers the user’s roles */
        put: operations["assignEndUserRole"];
        post?: never;
        /** Take a role from an end-user (idempotent) */
        delete: operations["unassignEndUserRole"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/access-policies": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The tenant’s access policies in evaluation order (priority, lowest first) */
        get: operations["listAccessPolicies"];
        put?: never;
        /** Create an access policy (applies to sign-ins from the next one on) */
        post: operations["createAccessPolicy"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/access-policies/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** One access policy */
        get: operations["getAccessPolicy"];
        /** Replace an access policy (condition lists left out become empty) */
        put: operations["replaceAccessPolicy"];
        post?: never;
        /** Delete an access policy */
        delete: operations["deleteAccessPolicy"];
        options?: never;
        head?: never;
        /** Change some fields of an access policy */
        patch: operations["updateAccessPolicy"];
        trace?: never;
    };
    "/api/v1/access-requests": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Sign-ins waiting for (or given) a decision, newest first */
        get: operations["listAccessRequests"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/access-requests/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** One access request */
        get: operations["getAccessRequest"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/access-requests/{id}/approve": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Approve: the end-user may sign in to the application for 8 hours; told by e-mail
         * @description Signed-in team members with the role tenant:owner or tenant:admin; API keys are refused (403 forbidden).
         */
        post: operations["approveAccessRequest"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/access-requests/{id}/reject": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Reject: the waiting sign-in is refused; the end-user is told by e-mail
         * @description Signed-in team members with the role tenant:owner or tenant:admin; API keys are refused (403 forbidden).
         */
        post: operations["rejectAccessRequest"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/saml-identity-providers": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Registered SAML identity providers */
        get: operations["listSamlIdentityProviders"];
        put?: never;
        /**
         * Register a SAML identity provider (its certificate is checked now)
         * @description Signed-in team members with the role tenant:owner or tenant:admin; API keys are refused (403 forbidden).
         */
        post: operations["createSamlIdentityProvider"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/saml-identity-providers/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** One SAML identity provider, with the SP values to give it */
        get: operations["getSamlIdentityProvider"];
        put?: never;
        post?: never;
        /**
         * Remove a registration (its users keep their accounts)
         * @description Signed-in team members with the role tenant:owner or tenant:admin; API keys are refused (403 forbidden).
         */
        delete: operations["deleteSamlIdentityProvider"];
        options?: never;
        head?: never;
        /**
         * Change a registration (a new certificate is checked as at registration)
         * @description Signed-in team members with the role tenant:owner or tenant:admin; API keys are refused (403 forbidden).
         */
        patch: operations["updateSamlIdentityProvider"];
        trace?: never;
    };
    "/api/v1/billing/plans": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The plans a tenant can be on, with prices and quotas */
        get: operations["listPlans"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/billing/subscription": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The tenant’s plan, status, current period and next invoice */
        get: operations["getSubscription"];
        /**
         * Move the tenant to another plan (owners only; audited)
         * @description Signed-in team members with the role tenant:owner; API keys are refused (403 forbidden).
         */
        put: operations["changePlan"];
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/billing/usage": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Operations per month by kind (from the usage meter), and what the tenant holds now */
        get: operations["getUsage"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/billing/invoices": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The tenant’s invoices, newest month first */
        get: operations["listInvoices"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/billing/webhooks/stripe": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** A payment provider’s signed webhook (Stripe: Stripe-Signature; invoice.paid marks an invoice paid) */
        post: operations["stripeWebhook"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/partners/referrals": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Tenants referred by the partner, newest first */
        get: operations["listReferrals"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/partners/commissions": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The partner’s commissions of a month */
        get: operations["listCommissions"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/partners/codes": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** A new referral code and its sign-up URL */
        post: operations["createReferralCode"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/partners/webhook-endpoints": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The partner’s event URLs */
        get: operations["listPartnerWebhookEndpoints"];
        put?: never;
        /**
         * Register a URL for the partner’s events
         * @description The URL must reach a public address (a local, private or link-local one is 400 naming body/url, unless the operator allowed it); at most 10 endpoints (409 partner_endpoint_limit) and one registration per URL (409 endpoint_exists).
         */
        post: operations["createPartnerWebhookEndpoint"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/partners/webhook-endpoints/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /** Stop sending events to a URL */
        delete: operations["deletePartnerWebhookEndpoint"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/partners/webhook-secret": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The secret that signs the partner’s events (made on first use) */
        get: operations["getPartnerWebhookSecret"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/partners/me": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The partner the caller acts for */
        get: operations["getPartner"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/partners/api-keys": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The partner’s API keys (never their secrets) */
        get: operations["listPartnerApiKeys"];
        put?: never;
        /**
         * A new partner API key, shown once
         * @description Only a person signed in to the partner portal; at most 20 live keys (409 partner_key_limit).
         */
        post: operations["createPartnerApiKey"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/partners/api-keys/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /** Revoke a partner API key: it stops working at once */
        delete: operations["revokePartnerApiKey"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/partners/audit": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The partner’s audit trail, newest first */
        get: operations["listPartnerAudit"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/signup": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Sign up a new tenant: a confirmation link is e-mailed
         * @description Creates nothing yet: the link (24 hours, single use) opens a page where the owner sets a password (or gives the existing account’s) and the tenant is created. An unknown referral code is a 400 naming referralCode.
         */
        post: operations["signUpTenant"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/partner-signup": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Apply as a partner: a confirmation link is e-mailed
         * @description Creates nothing yet: the link opens a page where the applicant sets the partner portal password; the partner then waits (pending) for an operator’s approval.
         */
        post: operations["signUpPartner"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
}
export type webhooks = Record<string, never>;
export interface components {
    schemas: {
        Health: {
            /**
             * @description ok: every check passes; degraded: only Redis is down (requests are served, background work waits); unavailable: a check the API cannot serve without failed (503)
             * @enum {string}
             */
            status: "ok" | "degraded" | "unavailable";
            version: string;
            /** @description Each dependency: ok, or failed and why */
            checks: {
                database: {
                    /** @enum {string} */
                    status: "ok" | "failed";
                    /** @description Why it failed, in words (no address, key or credential) */
                    reason?: string;
                };
                redis: {
                    /** @enum {string} */
                    status: "ok" | "failed";
                    /** @description Why it failed, in words (no address, key or credential) */
                    reason?: string;
                };
                /** @description The key that signs ID and access tokens opens (absent when the process has no sign-in) */
                identitySigningKeys?: {
                    /** @enum {string} */
                    status: "ok" | "failed";
                    /** @description Why it failed, in words (no address, key or credential) */
                    reason?: string;
                };
            };
            /** @description Same as checks.database (up/down), kept for existing monitors */
            database: {
                /** @enum {string} */
                status: "up" | "down";
            };
            /** @description Same as checks.redis (up/down), kept for existing monitors */
            redis: {
                /** @enum {string} */
                status: "up" | "down";
            };
            entropy: {
                /**
                 * @description Entropy source in use: the one a nonce is drawn from now
                 * @enum {string}
                 */
                source: "qrng-primary" | "qrng-secondary" | "system-csprng";
                /** @description The configured quantum sources (empty when none is configured) */
                sources: {
                    /** @enum {string} */
                    name: "qrng-primary" | "qrng-secondary";
                    /**
                     * @description starting: no batch fetched yet; down: failing, retried in the background
                     * @enum {string}
                     */
                    status: "starting" | "up" | "down";
                }[];
            };
        };
        CurrentTenant: {
            /**
             * Format: uuid
             * @description Tenant id
             */
            id: string;
            name: string;
            /**
             * Format: date-time
             * @description Creation time
             */
            createdAt: string;
            /** @description Who is calling: an API key or a signed-in team member */
            callerKind: "apiKey" | "member";
            /**
             * Format: uuid
             * @description The calling API key (API keys only)
             */
            apiKeyId?: string;
            /**
             * Format: uuid
             * @description The calling team member’s account (team members only)
             */
            accountId?: string;
            /**
             * @description A team member’s role in a tenant
             * @enum {string}
             */
            role?: "tenant:viewer" | "tenant:developer" | "tenant:admin" | "tenant:owner";
            /** @description What the caller may do in this tenant */
            scopes: string[];
        };
        /**
         * ValidationError
         * @description Invalid request (validation_failed, invalid_json, ...)
         */
        ValidationError: {
            /** @description validation_failed, invalid_json, ... */
            error: string;
            /** @description Human-readable explanation */
            message: string;
            fields?: ({
                /** @description Where, e.g. body/keyType */
                path: string;
                /** @description What is wrong, and what is allowed */
                message: string;
            } & {
                [key: string]: unknown;
            })[];
        } & {
            [key: string]: unknown;
        };
        /** Error */
        ErrorResponse: {
            /** @description Stable snake_case error code */
            error: string;
            /** @description Human-readable explanation */
            message: string;
        } & {
            [key: string]: unknown;
        };
        /** @description A key created by a restricted API key must name `keys` and `operations` within its own (403 `restriction_escalation`) */
        CreateApiKeyRequest: {
            /** @description A label for the key */
            name: string;
            /** @description Scopes granted; a key can only grant scopes it holds itself */
            scopes: ("secrets:read" | "secrets:write" | "keys:read" | "keys:write" | "keys:export" | "encryption:write" | "encrypt:invoke" | "ssh:read" | "ssh:write" | "certificates:read" | "certificates:write" | "applications:read" | "applications:write" | "endusers:read" | "endusers:write" | "roles:read" | "roles:write" | "policies:read" | "policies:write" | "audit:read" | "billing:read" | "apikeys:read" | "apikeys:write")[];
            /**
             * Format: date-time
             * @description When the key stops working; required, and no later than the creating key's expiry, when the creating key expires
             */
            expiresAt?: string;
            /** @description The keys the API key may use, by id or alias; key ids must be keys of the tenant, aliases need not exist yet */
            keys?: string[];
            /** @description The cryptographic operations the API key may perform, within its scopes */
            operations?: ("encrypt" | "decrypt" | "re_encrypt" | "generate_data_key" | "wrap" | "unwrap" | "sign" | "verify" | "mac" | "mac_verify")[];
        };
        /** ApiKey */
        ApiKeyView: {
            /**
             * Format: uuid
             * @description API key id
             */
            id: string;
            name: string;
            scopes: string[];
            /** @description First characters of the key, to recognise it */
            prefix: string;
            /**
             * Format: date-time
             * @description Creation time
             */
            createdAt: string;
            /** @description Actor that created the key */
            createdBy: string;
            /** @description null for keys made by the CLI or at tenant creation */
            parentId: string | null;
            expiresAt: string | null;
            revokedAt: string | null;
            /** @description Key ids and aliases the key may use, fixed at creation; null: every key of the tenant */
            keys: string[] | null;
            /** @description Cryptographic operations the key may perform, fixed at creation; null: all its scopes allow */
            operations: ("encrypt" | "decrypt" | "re_encrypt" | "generate_data_key" | "wrap" | "unwrap" | "sign" | "verify" | "mac" | "mac_verify")[] | null;
            /** @description When the key last made a request the audit log records (every cryptographic operation and change, and refusals; not reads); null: never */
            lastUsedAt: string | null;
        };
        /** AuditRecord */
        AuditRecord: {
            /** @description Record id (increases with time) */
            id: string;
            /**
             * Format: date-time
             * @description When the operation happened
             */
            occurredAt: string;
            /** @description apikey:<id>, cli or system */
            actor: string;
            /** @description <module>.<verb>, e.g. apikeys.create */
            action: string;
            resource: string | null;
            keyVersion: number | null;
            /** @enum {string} */
            outcome: "success" | "failure" | "denied";
            requestId: string | null;
            clientIp: string | null;
            details: {
                [key: string]: unknown;
            } | null;
        };
        CreateKeyRequest: {
            /** @description Unique within the tenant */
            name: string;
            /**
             * @description Key type (spec 2.1)
             * @enum {string}
             */
            keyType: "Encryption" | "Signing" | "HMAC";
            /**
             * @description Algorithm (spec 2.1)
             * @enum {string}
             */
            algorithm?: "ML-KEM-512" | "ML-KEM-768" | "ML-KEM-1024" | "ML-DSA-44" | "ML-DSA-65" | "ML-DSA-87" | "SLH-DSA-128s" | "RSA-2048" | "RSA-3072" | "RSA-4096" | "EC-P256" | "EC-P384" | "EC-P521" | "Ed25519" | "HMAC-SHA256" | "HMAC-SHA384" | "HMAC-SHA512" | "AES-128-GCM" | "AES-192-GCM" | "AES-256-GCM" | "X-Wing";
            /** @description Free text */
            description?: string;
            /** @description Tags (a set) */
            labels?: string[];
            /**
             * Format: date-time
             * @description Expiry (optional; absent means none)
             */
            expiresAt?: string;
            /** @description Make this the default key of its type (needs encryption:write besides keys:write) */
            isDefault?: boolean;
            /**
             * @description Allow private-key export (keys:export); cannot be changed later
             * @default false
             */
            exportable?: boolean;
        };
        /** Key */
        KeyView: {
            /**
             * Format: uuid
             * @description Key id
             */
            id: string;
            name: string;
            description: string;
            /**
             * @description Key type (spec 2.1)
             * @enum {string}
             */
            keyType: "Encryption" | "Signing" | "HMAC";
            /**
             * @description Algorithm (spec 2.1)
             * @enum {string}
             */
            algorithm: "ML-KEM-512" | "ML-KEM-768" | "ML-KEM-1024" | "ML-DSA-44" | "ML-DSA-65" | "ML-DSA-87" | "SLH-DSA-128s" | "RSA-2048" | "RSA-3072" | "RSA-4096" | "EC-P256" | "EC-P384" | "EC-P521" | "Ed25519" | "HMAC-SHA256" | "HMAC-SHA384" | "HMAC-SHA512" | "AES-128-GCM" | "AES-192-GCM" | "AES-256-GCM" | "X-Wing";
            isPostQuantum: boolean;
            /** @description True when state is Active */
            isActive: boolean;
            /** @description The tenant default key of its type */
            isDefault: boolean;
            isFavorite: boolean;
            labels: string[];
            /**
             * @description Lifecycle state (spec section 3)
             * @enum {string}
             */
            state: "Active" | "Expired" | "Revoked" | "Pending Deletion" | "Destroyed";
            /** @description Current version; each rotation adds one */
            version: number;
            /** @enum {string} */
            origin: "Generated" | "Imported";
            /** @description Whether the private key may be exported (keys:export); fixed at creation or import */
            exportable: boolean;
            /** @description Imported without its private key: verify and encrypt work; sign, decrypt, unwrap, private export and rotation answer 409 public_key_only */
            publicOnly: boolean;
            /** @description The certificate authority kind the key signs for, through it alone (/sign answers 409 key_reserved); null: an ordinary key */
            reservedFor: ("pki" | "ssh") | null;
            /** @description Its aliases (alias/<name>), usable wherever the key id is; in alias order */
            aliases: string[];
            /**
             * Format: date-time
             * @description Creation time
             */
            createdAt: string;
            /**
             * Format: date-time
             * @description Last change of the record
             */
            updatedAt: string;
            expiresAt: string | null;
            lastRotatedAt: string | null;
            nextRotationAt: string | null;
            scheduledDeletionDate: string | null;
        };
        KeyList: {
            data: components["schemas"]["KeyView"][];
            /** @description Keys matching the filters, counted up to 1,000 */
            total: number;
            /** @description False when more than 1,000 keys match: total is then a lower bound */
            totalIsExact: boolean;
            /** @description Pass as cursor for the next page */
            nextCursor: string | null;
            /** @description Present when active keys expire within 30 days */
            alert?: {
                /** @description Active keys expiring within windowDays */
                expiringSoon: number;
                windowDays: number;
                message: string;
            };
        };
        ImportKeyRequest: {
            /** @description Unique within the tenant */
            name: string;
            /**
             * @description Key type (spec 2.1)
             * @enum {string}
             */
            keyType: "Encryption" | "Signing" | "HMAC";
            /**
             * @description Algorithm (spec 2.1)
             * @enum {string}
             */
            algorithm?: "ML-KEM-512" | "ML-KEM-768" | "ML-KEM-1024" | "ML-DSA-44" | "ML-DSA-65" | "ML-DSA-87" | "SLH-DSA-128s" | "RSA-2048" | "RSA-3072" | "RSA-4096" | "EC-P256" | "EC-P384" | "EC-P521" | "Ed25519" | "HMAC-SHA256" | "HMAC-SHA384" | "HMAC-SHA512" | "AES-128-GCM" | "AES-192-GCM" | "AES-256-GCM" | "X-Wing";
            /** @description Free text */
            description?: string;
            /** @description Tags (a set) */
            labels?: string[];
            /**
             * Format: date-time
             * @description Expiry (optional; absent means none)
             */
            expiresAt?: string;
            /** @description Make this the default key of its type (needs encryption:write besides keys:write) */
            isDefault?: boolean;
            /**
             * @description Allow private-key export (keys:export); cannot be changed later
             * @default false
             */
            exportable?: boolean;
            /**
             * @description Format of keyMaterial (spec 2.2)
             * @enum {string}
             */
            format: "PEM" | "PKCS#8" | "JWK" | "DER" | "RAW";
            keyMaterial: string | ({
                /** @description JWK key type */
                kty: string;
            } & {
                [key: string]: unknown;
            });
            /** @description Password of an encrypted PKCS#8 key */
            password?: string;
            /**
             * @description keyMaterial is a public key (PEM "PUBLIC KEY", DER SPKI, a JWK without d, or RAW: the Ed25519, ML-DSA, ML-KEM, SLH-DSA or X-Wing public encoding, an EC SEC 1 point, RSA PKCS#1): the key can verify and encrypt, never sign or decrypt
             * @default false
             */
            publicOnly?: boolean;
        };
        UpdateKeyRequest: {
            /** @description Unique within the tenant */
            name?: string;
            /** @description Free text */
            description?: string;
            /** @description Tags (a set) */
            labels?: string[];
            /** @description null clears it */
            expiresAt?: string | null;
            /** @description Changing the default needs encryption:write besides keys:write */
            isDefault?: boolean;
            isFavorite?: boolean;
        };
        KeyVersionList: {
            data: {
                version: number;
                /**
                 * Format: date-time
                 * @description When the version was created
                 */
                createdAt: string;
                /**
                 * @description Lifecycle state (spec section 3)
                 * @enum {string}
                 */
                state: "Active" | "Expired" | "Revoked" | "Pending Deletion" | "Destroyed";
                /** @description The version new operations use */
                isCurrent: boolean;
            }[];
        };
        /** PublicKey */
        PublicKeyView: {
            /** @description PEM text, or Base64 of the DER or RAW bytes */
            publicKey: string;
            /**
             * @description Algorithm (spec 2.1)
             * @enum {string}
             */
            algorithm: "ML-KEM-512" | "ML-KEM-768" | "ML-KEM-1024" | "ML-DSA-44" | "ML-DSA-65" | "ML-DSA-87" | "SLH-DSA-128s" | "RSA-2048" | "RSA-3072" | "RSA-4096" | "EC-P256" | "EC-P384" | "EC-P521" | "Ed25519" | "HMAC-SHA256" | "HMAC-SHA384" | "HMAC-SHA512" | "AES-128-GCM" | "AES-192-GCM" | "AES-256-GCM" | "X-Wing";
            version: number;
            /** @enum {string} */
            format: "PEM" | "DER" | "RAW";
            name?: string;
            description?: string;
            /**
             * @description Key type (spec 2.1)
             * @enum {string}
             */
            keyType?: "Encryption" | "Signing" | "HMAC";
            isPostQuantum?: boolean;
            /** @description True when state is Active */
            isActive?: boolean;
            /** @description The tenant default key of its type */
            isDefault?: boolean;
            isFavorite?: boolean;
            /**
             * Format: date-time
             * @description Creation time
             */
            createdAt?: string;
            expiresAt?: string | null;
            lastRotatedAt?: string | null;
            labels?: string[];
            /**
             * @description Lifecycle state (spec section 3)
             * @enum {string}
             */
            state?: "Active" | "Expired" | "Revoked" | "Pending Deletion" | "Destroyed";
            scheduledDeletionDate?: string | null;
        };
        /**
         * JWK
         * @description A public JWK (RFC 7517); kty AKP for ML-KEM/ML-DSA/SLH-DSA
         */
        PublicJwk: {
            kty: string;
            kid: string;
            use: string;
        } & {
            [key: string]: unknown;
        };
        ExportPrivateKeyRequest: {
            /** @description The key's name, repeated to confirm the export */
            confirm: string;
            /**
             * @description PEM and DER are PKCS#8
             * @default PEM
             * @enum {string}
             */
            format: "PEM" | "DER" | "JWK" | "RAW";
            /** @description Encrypts the PKCS#8 output (PEM and DER): PBES2, PBKDF2-HMAC-SHA256 with 600,000 iterations, AES-256-CBC. At least 12 characters */
            password?: string;
            /** @description Key version (default: current) */
            version?: number;
        };
        PrivateKeyExport: {
            /**
             * Format: uuid
             * @description Key id
             */
            keyId: string;
            /**
             * @description Algorithm (spec 2.1)
             * @enum {string}
             */
            algorithm: "ML-KEM-512" | "ML-KEM-768" | "ML-KEM-1024" | "ML-DSA-44" | "ML-DSA-65" | "ML-DSA-87" | "SLH-DSA-128s" | "RSA-2048" | "RSA-3072" | "RSA-4096" | "EC-P256" | "EC-P384" | "EC-P521" | "Ed25519" | "HMAC-SHA256" | "HMAC-SHA384" | "HMAC-SHA512" | "AES-128-GCM" | "AES-192-GCM" | "AES-256-GCM" | "X-Wing";
            version: number;
            /** @enum {string} */
            format: "PEM" | "DER" | "JWK" | "RAW";
            /** @description True when the PKCS#8 output is password-protected */
            encrypted: boolean;
            privateKey: string | {
                [key: string]: unknown;
            };
        };
        CreateKeyAliasRequest: {
            /** @description The new alias. Case-sensitive, unique in the tenant; alias/kms/ is reserved */
            alias: string;
            /** @description The key it names: the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
            keyId: string;
        };
        /** KeyAlias */
        KeyAlias: {
            /** @description alias/<name> */
            alias: string;
            /**
             * Format: uuid
             * @description The key the alias names
             */
            keyId: string;
            /**
             * Format: date-time
             * @description When the alias was created
             */
            createdAt: string;
            /**
             * Format: date-time
             * @description When the alias was last moved (createdAt until then)
             */
            updatedAt: string;
        };
        KeyAliasList: {
            /** @description In alias order (byte order) */
            data: components["schemas"]["KeyAlias"][];
            /** @description Pass as cursor for the next page */
            nextCursor: string | null;
        };
        MoveKeyAliasRequest: {
            /** @description The key the alias names from now on: of the same key type as the current one: the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
            keyId: string;
        };
        RotationPolicyRequest: {
            /**
             * @description Daily 24 h, Weekly 7 d, Monthly 30 d, Quarterly 90 d, Yearly 365 d (spec 2.3)
             * @enum {string}
             */
            frequency: "Daily" | "Weekly" | "Monthly" | "Quarterly" | "Yearly";
            webhookUrl?: string | null;
        };
        RotationPolicyView: {
            /** Format: uuid */
            keyId: string;
            /** @enum {string} */
            frequency: "Daily" | "Weekly" | "Monthly" | "Quarterly" | "Yearly";
            /** @description The interval the frequency stands for */
            intervalSeconds: number;
            webhookUrl: string | null;
            paused: boolean;
            pausedAt: string | null;
            nextRotationAt: string | null;
            lastRotatedAt: string | null;
            /**
             * Format: date-time
             * @description When the policy was created
             */
            createdAt: string;
            /**
             * Format: date-time
             * @description When the policy last changed
             */
            updatedAt: string;
        };
        CreateCertificateAuthority: {
            /** @description Unique within the tenant */
            name: string;
            /**
             * @description root: self-signed; intermediate: signed by parentId, or by an outside CA (parentId absent)
             * @enum {string}
             */
            type: "root" | "intermediate";
            /**
             * @description Default: ML-DSA-65, or the algorithm of the key keyId names
             * @enum {string}
             */
            algorithm?: "ML-DSA-44" | "ML-DSA-65" | "ML-DSA-87" | "SLH-DSA-128s" | "EC-P256" | "EC-P384" | "RSA-3072" | "RSA-4096" | "Ed25519";
            /**
             * Format: uuid
             * @description An existing Signing key of the tenant, not exportable (absent: a new key is generated)
             */
            keyId?: string;
            /**
             * Format: uuid
             * @description The CA of the tenant that signs this intermediate
             */
            parentId?: string;
            subject: {
                /** @description CN (RFC 5280 ub-common-name: 64) */
                commonName: string;
                /** @description O */
                organization?: string;
                /** @description OU */
                organizationalUnit?: string;
                /** @description C: ISO 3166 two letters */
                country?: string;
                /** @description ST */
                state?: string;
                /** @description L */
                locality?: string;
            };
            /** @description Roots 730-3650 (default 3650); intermediates up to the parent end (default 1825) */
            validityDays?: number;
            /** @description CAs allowed below */
            pathLength?: number;
            /** @description Names the CA and those below it may certify (critical) */
            nameConstraints?: {
                permittedDnsDomains?: string[];
                excludedDnsDomains?: string[];
                permittedIpRanges?: string[];
                excludedIpRanges?: string[];
            };
            /** @description Default: this service’s public CRL URL of the CA */
            crlDistributionPoints?: string[];
            /** @description AIA caIssuers; default: this service’s URL of the CA certificate */
            issuingCertificateUrls?: string[];
            /** @description AIA ocsp; default: this service’s OCSP responder of the CA */
            ocspUrls?: string[];
        };
        CertificateAuthority: {
            id: string;
            name: string;
            /** @enum {string} */
            type: "root" | "intermediate";
            /**
             * @description pending: waiting for its certificate; revoked: its parent revoked its certificate
             * @enum {string}
             */
            status: "pending" | "active" | "revoked";
            parentId: string | null;
            keyId: string;
            keyVersion: number;
            algorithm: string;
            subject: {
                commonName: string;
                organization?: string;
                organizationalUnit?: string;
                country?: string;
                state?: string;
                locality?: string;
            };
            pathLength: number | null;
            nameConstraints: {
                permittedDnsDomains?: string[];
                excludedDnsDomains?: string[];
                permittedIpRanges?: string[];
                excludedIpRanges?: string[];
            } | null;
            crlDistributionPoints: string[];
            issuingCertificateUrls: string[];
            /** @description AIA ocsp: the OCSP responder its certificates name */
            ocspUrls: string[];
            certificate: string | null;
            /** @description The certificates above this CA, issuer first */
            chain: string[];
            csr: string | null;
            notBefore: string | null;
            notAfter: string | null;
            /** @description The first certificate it signed: from then on its CRL and issuer URLs are fixed */
            firstIssuedAt: string | null;
            createdAt: string;
            updatedAt: string;
        };
        CertificateAuthorityList: {
            data: components["schemas"]["CertificateAuthority"][];
            total: number;
            limit: number;
            offset: number;
        };
        UpdateCertificateAuthority: {
            /** @description Before the first certificate only */
            crlDistributionPoints?: string[];
            /** @description Before the first certificate only */
            issuingCertificateUrls?: string[];
            /** @description Before the first certificate only */
            ocspUrls?: string[];
        };
        ImportCaCertificate: {
            /** @description The PEM certificate the outside parent issued for the CA’s CSR */
            certificate: string;
            /** @description The parent’s chain, issuer first */
            chain?: string[];
        };
        CreateCertificateRole: {
            /** @description Letters, digits, . _ - */
            name: string;
            /** @description Domains names may be in (bare, subdomains or wildcards as allowed below) */
            allowedDomains?: string[];
            /** @description The allowed domain itself (default false) */
            allowBareDomains?: boolean;
            /** @description Names below an allowed domain (default false) */
            allowSubdomains?: boolean;
            /** @description Names like *.example.com (default false) */
            allowWildcardCertificates?: boolean;
            /** @description IP address SANs (default false) */
            allowIpSans?: boolean;
            /** @description Any name, the domain list ignored (default false) */
            allowAnyName?: boolean;
            /** @description Names must be valid hostnames (default true) */
            enforceHostnames?: boolean;
            /** @description Leaf key algorithms (default: all) */
            allowedKeyAlgorithms?: ("EC-P256" | "EC-P384" | "RSA-2048" | "RSA-3072" | "RSA-4096" | "Ed25519" | "ML-DSA-44" | "ML-DSA-65" | "ML-DSA-87" | "ML-KEM-512" | "ML-KEM-768" | "ML-KEM-1024" | "EC-P521" | "SLH-DSA-128s")[];
            keyUsage?: ("digitalSignature" | "contentCommitment" | "keyEncipherment" | "dataEncipherment" | "keyAgreement")[];
            extKeyUsage?: ("serverAuth" | "clientAuth" | "codeSigning" | "emailProtection" | "timeStamping" | "ocspSigning")[];
            /** @description Default leaf lifetime (30 days) */
            ttlSeconds?: number;
            /** @description Longest leaf lifetime (90 days) */
            maxTtlSeconds?: number;
            /**
             * @description A leaf that would outlive the CA: refused (default) or cut to the CA’s end
             * @enum {string}
             */
            notAfterBehavior?: "error" | "truncate";
            /** @description Issue without keeping the certificate (revocation by serial still works) */
            noStore?: boolean;
        };
        CertificateRole: {
            name: string;
            caId: string;
            /** @description Domains names may be in (bare, subdomains or wildcards as allowed below) */
            allowedDomains: string[];
            /** @description The allowed domain itself (default false) */
            allowBareDomains: boolean;
            /** @description Names below an allowed domain (default false) */
            allowSubdomains: boolean;
            /** @description Names like *.example.com (default false) */
            allowWildcardCertificates: boolean;
            /** @description IP address SANs (default false) */
            allowIpSans: boolean;
            /** @description Any name, the domain list ignored (default false) */
            allowAnyName: boolean;
            /** @description Names must be valid hostnames (default true) */
            enforceHostnames: boolean;
            /** @description Leaf key algorithms (default: all) */
            allowedKeyAlgorithms: ("EC-P256" | "EC-P384" | "RSA-2048" | "RSA-3072" | "RSA-4096" | "Ed25519" | "ML-DSA-44" | "ML-DSA-65" | "ML-DSA-87" | "ML-KEM-512" | "ML-KEM-768" | "ML-KEM-1024" | "EC-P521" | "SLH-DSA-128s")[];
            keyUsage: ("digitalSignature" | "contentCommitment" | "keyEncipherment" | "dataEncipherment" | "keyAgreement")[];
            extKeyUsage: ("serverAuth" | "clientAuth" | "codeSigning" | "emailProtection" | "timeStamping" | "ocspSigning")[];
            /** @description Default leaf lifetime (30 days) */
            ttlSeconds: number;
            /** @description Longest leaf lifetime (90 days) */
            maxTtlSeconds: number;
            /**
             * @description A leaf that would outlive the CA: refused (default) or cut to the CA’s end
             * @enum {string}
             */
            notAfterBehavior: "error" | "truncate";
            /** @description Issue without keeping the certificate (revocation by serial still works) */
            noStore: boolean;
            createdAt: string;
            updatedAt: string;
        };
        CertificateRoleList: {
            data: components["schemas"]["CertificateRole"][];
        };
        UpdateCertificateRole: {
            /** @description Domains names may be in (bare, subdomains or wildcards as allowed below) */
            allowedDomains?: string[];
            /** @description The allowed domain itself (default false) */
            allowBareDomains?: boolean;
            /** @description Names below an allowed domain (default false) */
            allowSubdomains?: boolean;
            /** @description Names like *.example.com (default false) */
            allowWildcardCertificates?: boolean;
            /** @description IP address SANs (default false) */
            allowIpSans?: boolean;
            /** @description Any name, the domain list ignored (default false) */
            allowAnyName?: boolean;
            /** @description Names must be valid hostnames (default true) */
            enforceHostnames?: boolean;
            /** @description Leaf key algorithms (default: all) */
            allowedKeyAlgorithms?: ("EC-P256" | "EC-P384" | "RSA-2048" | "RSA-3072" | "RSA-4096" | "Ed25519" | "ML-DSA-44" | "ML-DSA-65" | "ML-DSA-87" | "ML-KEM-512" | "ML-KEM-768" | "ML-KEM-1024" | "EC-P521" | "SLH-DSA-128s")[];
            keyUsage?: ("digitalSignature" | "contentCommitment" | "keyEncipherment" | "dataEncipherment" | "keyAgreement")[];
            extKeyUsage?: ("serverAuth" | "clientAuth" | "codeSigning" | "emailProtection" | "timeStamping" | "ocspSigning")[];
            /** @description Default leaf lifetime (30 days) */
            ttlSeconds?: number;
            /** @description Longest leaf lifetime (90 days) */
            maxTtlSeconds?: number;
            /**
             * @description A leaf that would outlive the CA: refused (default) or cut to the CA’s end
             * @enum {string}
             */
            notAfterBehavior?: "error" | "truncate";
            /** @description Issue without keeping the certificate (revocation by serial still works) */
            noStore?: boolean;
        };
        IssueCertificate: {
            /**
             * Format: uuid
             * @description The issuing CA
             */
            caId: string;
            /** @description Letters, digits, . _ - */
            role: string;
            /** @description A PKCS#10 request (PEM): its signature proves possession of the key */
            csr?: string;
            /**
             * @description Without csr: the key pair the service generates (default EC-P256); ML-KEM needs this
             * @enum {string}
             */
            keyAlgorithm?: "EC-P256" | "EC-P384" | "RSA-2048" | "RSA-3072" | "RSA-4096" | "Ed25519" | "ML-DSA-44" | "ML-DSA-65" | "ML-DSA-87" | "ML-KEM-512" | "ML-KEM-768" | "ML-KEM-1024";
            /** @description CN; absent: the CSR’s */
            commonName?: string;
            dnsNames?: string[];
            ipAddresses?: string[];
            ttlSeconds?: number;
        };
        IssuedCertificate: {
            /** @description Hex, lower case */
            serial: string;
            caId: string;
            role: string;
            commonName: string | null;
            dnsNames: string[];
            ipAddresses: string[];
            keyAlgorithm: string;
            notBefore: string;
            notAfter: string;
            /** @enum {string} */
            status: "valid" | "revoked" | "expired";
            revokedAt: string | null;
            revocationReason: string | null;
            /** @description PEM */
            certificate: string;
            createdAt: string;
            /** @description false: the role said noStore */
            stored: boolean;
            /** @description PEM, the issuing CA first */
            chain: string[];
            /** @description PKCS#8 PEM of a generated key: shown once */
            privateKey?: string;
        };
        Certificate: {
            /** @description Hex, lower case */
            serial: string;
            caId: string;
            role: string;
            commonName: string | null;
            dnsNames: string[];
            ipAddresses: string[];
            keyAlgorithm: string;
            notBefore: string;
            notAfter: string;
            /** @enum {string} */
            status: "valid" | "revoked" | "expired";
            revokedAt: string | null;
            revocationReason: string | null;
            /** @description PEM */
            certificate: string;
            createdAt: string;
        };
        CertificateList: {
            data: components["schemas"]["Certificate"][];
            total: number;
            limit: number;
            offset: number;
        };
        RevokeCertificate: {
            /**
             * @default unspecified
             * @enum {string}
             */
            reason?: "unspecified" | "keyCompromise" | "caCompromise" | "affiliationChanged" | "superseded" | "cessationOfOperation" | "privilegeWithdrawn";
            /**
             * Format: uuid
             * @description Needed for a certificate the service did not store (noStore)
             */
            caId?: string;
        };
        CertificateRevocation: {
            serial: string;
            caId: string;
            revokedAt: string;
            revocationReason: string;
            /** @description false: issued under a noStore role (the CRL lists it all the same) */
            stored: boolean;
        };
        CreateSshCaRequest: {
            /**
             * @description user: certificates for logging in to hosts; host: certificates hosts present to clients
             * @enum {string}
             */
            type: "user" | "host";
            /**
             * @description The algorithm of the key generated for the CA (default Ed25519); not with keyId
             * @enum {string}
             */
            algorithm?: "Ed25519" | "EC-P256" | "EC-P384" | "EC-P521" | "RSA-2048" | "RSA-3072" | "RSA-4096";
            /**
             * Format: uuid
             * @description An existing Signing key of the tenant to sign with instead of a new one: not exportable, of one of the CA algorithms; its current version is pinned
             */
            keyId?: string;
            /** @description Validity of a certificate whose request names none (user 57600, host 2592000 by default) */
            defaultValiditySeconds?: number;
            /** @description The longest validity a request may ask for (user at most and by default 86400, host 6048000) */
            maxValiditySeconds?: number;
        };
        /** SshCa */
        SshCaView: {
            /**
             * Format: uuid
             * @description CA id: the public key and KRL URLs name it
             */
            id: string;
            /**
             * @description user: certificates for logging in to hosts; host: certificates hosts present to clients
             * @enum {string}
             */
            type: "user" | "host";
            /**
             * Format: uuid
             * @description The tenant key the CA signs with
             */
            keyId: string;
            /** @description The pinned version of that key */
            keyVersion: number;
            /** @enum {string} */
            algorithm: "Ed25519" | "EC-P256" | "EC-P384" | "EC-P521" | "RSA-2048" | "RSA-3072" | "RSA-4096";
            /** @description ssh-ed25519, ecdsa-sha2-nistp256/384/521 or rsa-sha2-256 */
            signatureAlgorithm: string;
            /** @description The CA key as one OpenSSH line (TrustedUserCAKeys, ssh-keygen -Q -s) */
            publicKey: string;
            /** @description SHA256 fingerprint, as ssh-keygen -l prints it */
            fingerprint: string;
            /** @description User CA: `cert-authority <key>` for a user’s authorized_keys; null for a host CA */
            authorizedKeysLine: string | null;
            /** @description Host CA: `@cert-authority * <key>` for known_hosts; null for a user CA */
            knownHostsLine: string | null;
            defaultValiditySeconds: number;
            maxValiditySeconds: number;
            /** @description Path of the public key as text/plain (no credential) */
            publicKeyUrl: string;
            /** @description Path of the KRL for sshd’s RevokedKeys (no credential) */
            krlUrl: string;
            /**
             * Format: date-time
             * @description Creation time
             */
            createdAt: string;
            createdBy: string;
            /**
             * Format: date-time
             * @description Last change of the settings
             */
            updatedAt: string;
            updatedBy: string;
        };
        SshCaList: {
            /** @description The tenant’s user and host CAs (at most one of each) */
            data: components["schemas"]["SshCaView"][];
        };
        UpdateSshCaRequest: {
            /** @description Validity of a certificate whose request names none */
            defaultValiditySeconds?: number;
            /** @description The longest validity a request may ask for */
            maxValiditySeconds?: number;
        };
        SignSshCertificateRequest: {
            /**
             * Format: uuid
             * @description The CA that signs: its type is the certificate’s
             */
            caId: string;
            /** @description The key to certify as an OpenSSH line (the .pub file): ssh-ed25519, ecdsa-sha2-nistp256/384/521, or ssh-rsa of 2048 bits or more */
            publicKey: string;
            /** @description At least one: the users (or host names) the certificate is valid for */
            principals: string[];
            /** @description The certificate’s key ID, which sshd logs (default: the certificate’s id in the service) */
            keyId?: string;
            /** @description From now (the certificate starts 5 minutes earlier); default and maximum are the CA’s */
            validitySeconds?: number;
            /** @description User certificates only */
            criticalOptions?: {
                /** @description force-command: the only command the certificate runs */
                forceCommand?: string;
                /** @description source-address: comma-separated CIDR blocks the client must connect from */
                sourceAddress?: string;
            };
            /** @description User certificates only; default [permit-pty]; [] for none */
            extensions?: ("permit-X11-forwarding" | "permit-agent-forwarding" | "permit-port-forwarding" | "permit-pty" | "permit-user-rc")[];
        };
        /** SshCertificate */
        SshCertificateView: {
            /**
             * Format: uuid
             * @description Certificate id
             */
            id: string;
            /**
             * Format: uuid
             * @description The CA that signed it
             */
            caId: string;
            /**
             * @description user: certificates for logging in to hosts; host: certificates hosts present to clients
             * @enum {string}
             */
            type: "user" | "host";
            /** @description The 64-bit serial, in decimal (as ssh-keygen -L prints it) */
            serial: string;
            /** @description The certificate’s key ID */
            keyId: string;
            principals: string[];
            /**
             * Format: date-time
             * @description Start of validity
             */
            validAfter: string;
            /**
             * Format: date-time
             * @description End of validity
             */
            validBefore: string;
            /** @description Type of the certified key, e.g. ssh-ed25519 */
            publicKeyType: string;
            /** @description SHA256 fingerprint of the certified key */
            publicKeyFingerprint: string;
            criticalOptions: {
                forceCommand?: string;
                sourceAddress?: string;
            };
            extensions: string[];
            /** @description The certificate as one line: save it as <key>-cert.pub */
            certificate: string;
            /** @enum {string} */
            status: "valid" | "expired" | "revoked";
            revokedAt: string | null;
            revocationReason: string | null;
            /**
             * Format: date-time
             * @description Issue time
             */
            createdAt: string;
            createdBy: string;
        };
        SshCertificateList: {
            data: components["schemas"]["SshCertificateView"][];
            total: number;
            limit: number;
            offset: number;
        };
        RevokeSshCertificateRequest: {
            /** @description Why (kept with the certificate and in no KRL) */
            reason?: string;
        };
        CreateCloudConnection: {
            /** @description A name for people, unique in the tenant */
            name: string;
            /**
             * @description The cloud KMS: aws, azure, gcp or scaleway
             * @enum {string}
             */
            provider: "aws" | "azure" | "gcp" | "scaleway";
            /** @description Non-secret fields: region, ids, endpoint, caCertificate (docs/cloud-export.md) */
            settings: {
                [key: string]: string | number | boolean;
            };
            /** @description Secret fields: sealed by the tenant KEK, never returned */
            credentials: {
                [key: string]: string | number | boolean;
            };
        };
        CloudConnection: {
            id: string;
            name: string;
            /**
             * @description The cloud KMS: aws, azure, gcp or scaleway
             * @enum {string}
             */
            provider: "aws" | "azure" | "gcp" | "scaleway";
            /** @description The non-secret fields as stored; credentials are never returned */
            settings: {
                [key: string]: unknown;
            };
            /**
             * Format: date-time
             * @description Created
             */
            createdAt: string;
            /**
             * Format: date-time
             * @description Last changed
             */
            updatedAt: string;
            /**
             * Format: date-time
             * @description When the credentials were last set
             */
            credentialsUpdatedAt: string;
        };
        CloudConnectionList: {
            data: components["schemas"]["CloudConnection"][];
            total: number;
        };
        RotateCloudCredentials: {
            /** @description The new secret fields */
            credentials: {
                [key: string]: string | number | boolean;
            };
        };
        CloudConnectionTest: {
            /** @enum {string} */
            status: "ok" | "failed";
            error: {
                code: string;
                message: string;
            } | null;
        };
        CreateCloudExport: {
            /**
             * Format: uuid
             * @description The cloud connection
             */
            connectionId: string;
            /** @description Where at the provider (docs/cloud-export.md): e.g. AWS alias, Azure vaultUrl and keyName */
            target: {
                [key: string]: string | number | boolean;
            };
        };
        CloudExport: {
            id: string;
            keyId: string;
            connectionId: string;
            /**
             * @description The cloud KMS: aws, azure, gcp or scaleway
             * @enum {string}
             */
            provider: "aws" | "azure" | "gcp" | "scaleway";
            /** @description Where the key goes at the provider */
            target: {
                [key: string]: unknown;
            };
            /**
             * @description pending: a push is due or retrying; synced: desiredVersion is at the cloud; failed: retries ran out or the cloud refused
             * @enum {string}
             */
            syncStatus: "pending" | "synced" | "failed";
            /** @description The key version that should be at the cloud */
            desiredVersion: number;
            /** @description Attempts of the current sync */
            attempts: number;
            nextAttemptAt: string | null;
            lastAttemptAt: string | null;
            lastSyncAt: string | null;
            lastSyncVersion: number | null;
            lastSyncError: {
                code: string;
                message: string;
            } | null;
            providerKeyId: string | null;
            /**
             * Format: date-time
             * @description Created
             */
            createdAt: string;
        };
        CloudExportList: {
            data: components["schemas"]["CloudExport"][];
            total: number;
        };
        InsightPurposeGroup: {
            keyType: string;
            algorithm: string;
            shared: {
                /** @enum {string} */
                kind: "label" | "word";
                /** @description The label, or the significant word (lower-case) */
                value: string;
            };
            /** @description Active keys of this type and algorithm that share it */
            count: number;
            /** @description The group’s first and last key by name */
            examples: {
                id: string;
                name: string;
            }[];
        };
        InsightFinding: {
            /**
             * @description docs/insights.md describes each finding and its thresholds
             * @enum {string}
             */
            code: "expired_key_in_use" | "weak_algorithm" | "no_rotation_policy" | "expiring_soon" | "rotation_paused_too_long" | "unused_key" | "post_quantum_candidate" | "untagged_key" | "duplicate_purpose";
            /** @enum {string} */
            severity: "critical" | "warning" | "info";
            title: string;
            /** @description How many keys the finding holds for */
            count: number;
            /** @description The affected keys, by name: at most 100, the first by name (count is the total) */
            keys: {
                id: string;
                name: string;
            }[];
            recommendation: string;
            reference: string | null;
            /** @description duplicate_purpose in the tenant’s report: the largest groups (at most 20) of keys sharing a label or a word */
            groups?: components["schemas"]["InsightPurposeGroup"][];
        };
        Insights: {
            /**
             * Format: date-time
             * @description When the report was made
             */
            generatedAt: string;
            /** @description Affected keys per severity (a key counts once per finding) */
            summary: {
                critical: number;
                warning: number;
                info: number;
            };
            findings: components["schemas"]["InsightFinding"][];
        };
        TagSuggestion: {
            id: string;
            keyId: string;
            label: string;
            /** @description Why the engine suggests it */
            reason: string;
            /** @enum {string} */
            engine: "builtin" | "model";
            /** @enum {string} */
            status: "pending" | "accepted" | "rejected";
            jobId: string | null;
            /**
             * Format: date-time
             * @description Suggested
             */
            createdAt: string;
            decidedAt: string | null;
            decidedBy: string | null;
        };
        CreatedTagSuggestions: {
            data: components["schemas"]["TagSuggestion"][];
        };
        TagSuggestionList: {
            data: components["schemas"]["TagSuggestion"][];
            total: number;
        };
        DecideAllTagSuggestions: {
            /**
             * Format: uuid
             * @description Only this key’s pending suggestions
             */
            keyId?: string;
        };
        DecidedTagSuggestions: {
            decided: number;
            data: components["schemas"]["TagSuggestion"][];
        };
        TagSuggestionJob: {
            id: string;
            /**
             * @description failed: a batch failed 3 times (error says why); the keys before it keep their suggestions
             * @enum {string}
             */
            status: "running" | "completed" | "failed";
            totalKeys: number;
            processedKeys: number;
            batchSize: number;
            batchesTotal: number;
            batchesDone: number;
            suggestionsCreated: number;
            engine: string | null;
            /**
             * Format: date-time
             * @description Asked for
             */
            createdAt: string;
            finishedAt: string | null;
            error: string | null;
        };
        WebhookDelivery: {
            /** Format: uuid */
            id: string;
            /** Format: uuid */
            eventId: string;
            eventType: string;
            url: string;
            /** @enum {string} */
            status: "pending" | "succeeded" | "failed";
            attempts: {
                attempt: number;
                /**
                 * Format: date-time
                 * @description When the attempt started
                 */
                at: string;
                /** @description null: no HTTP answer */
                statusCode: number | null;
                /** @description null on success; http_error, redirect_not_followed, timeout, connection_failed, or destination_not_allowed (the URL resolves to an address this service does not call: no request was made) */
                error: string | null;
                durationMs: number;
                /** @description The first 256 bytes of the answer, only from a receiver the operator allowed (KMS_OUTBOUND_ALLOW); otherwise null */
                responseExcerpt: string | null;
            }[];
            nextAttemptAt: string | null;
            /**
             * Format: date-time
             * @description When the event occurred
             */
            createdAt: string;
            completedAt: string | null;
            /** @description The exact body that was signed and sent */
            payload: string;
        };
        WebhookSecret: {
            /** @description HMAC-SHA256 key for X-Service-Signature: the UTF-8 bytes of this whole string */
            secret: string;
        };
        EncryptRequest: {
            /** @description Encryption key (default: the tenant default Encryption key): the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
            keyId?: string;
            /**
             * Format: byte
             * @description Data to encrypt, Base64: up to 10485760 bytes (10 MiB) of plaintext, 13981016 characters
             */
            plaintext: string;
            /** @description Additional authenticated data: a string, or a map of string to string bound as its canonical JSON (so the map {"b":"2","a":"1"} and the string {"a":"1","b":"2"} are the same context). The same context is needed to decrypt */
            context?: string | {
                [key: string]: string;
            };
            /**
             * @description standard (recommended): the envelope parts as separate fields. legacy: the whole envelope as one Base64 string in `ciphertext`, for clients of older single-string formats; not recommended for new integrations (docs/envelope-format.md)
             * @default standard
             * @enum {string}
             */
            mode?: "standard" | "legacy";
        };
        EncryptResponse: {
            /**
             * Format: byte
             * @description AES-256-GCM ciphertext, Base64 (legacy mode: the whole compact envelope)
             */
            ciphertext: string;
            /**
             * Format: byte
             * @description Header (format, scheme, key id, key version) and the protected DEK (ML-KEM or X-Wing ciphertext, RSA-OAEP- or AES-GCM-sealed DEK), Base64 (absent in legacy mode)
             */
            encapsulatedKey?: string;
            /**
             * Format: byte
             * @description AES-GCM nonce (12 bytes), Base64 (absent in legacy mode)
             */
            nonce?: string;
            /**
             * Format: byte
             * @description AES-GCM authentication tag (16 bytes), Base64 (absent in legacy mode)
             */
            tag?: string;
            /**
             * Format: uuid
             * @description The key used
             */
            keyId: string;
            /** @description The key version used (also inside the envelope) */
            keyVersion: number;
            /** @enum {string} */
            mode?: "legacy";
        };
        DecryptRequest: {
            /** @description The key that encrypted (optional: the envelope names it): the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
            keyId?: string;
            /** @description Cross-check of the version the envelope names */
            keyVersion?: number;
            /**
             * Format: byte
             * @description From the encrypt response
             */
            ciphertext: string;
            /**
             * Format: byte
             * @description From the encrypt response (standard mode)
             */
            encapsulatedKey?: string;
            /**
             * Format: byte
             * @description From the encrypt response (standard mode)
             */
            nonce?: string;
            /**
             * Format: byte
             * @description From the encrypt response (standard mode)
             */
            tag?: string;
            /** @description Additional authenticated data: a string, or a map of string to string bound as its canonical JSON (so the map {"b":"2","a":"1"} and the string {"a":"1","b":"2"} are the same context). The same context is needed to decrypt */
            context?: string | {
                [key: string]: string;
            };
            /**
             * @description standard (recommended): the envelope parts as separate fields. legacy: the whole envelope as one Base64 string in `ciphertext`, for clients of older single-string formats; not recommended for new integrations (docs/envelope-format.md)
             * @default standard
             * @enum {string}
             */
            mode?: "standard" | "legacy";
            /**
             * Format: uuid
             * @description From a re-encrypt answer: the key it re-encrypted from (ignored: the envelope names its key)
             */
            sourceKeyId?: string;
            /** @description From a re-encrypt answer: the version it re-encrypted from (ignored) */
            sourceKeyVersion?: number;
        };
        DecryptResponse: {
            /**
             * Format: byte
             * @description Base64
             */
            plaintext: string;
            /**
             * Format: uuid
             * @description The key that decrypted
             */
            keyId: string;
            keyVersion: number;
        };
        EncryptBatchRequest: {
            items: {
                /** @description Encryption key (default: the tenant default Encryption key): the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
                keyId?: string;
                /**
                 * Format: byte
                 * @description Data to encrypt, Base64
                 */
                plaintext: string;
                /** @description Additional authenticated data: a string, or a map of string to string bound as its canonical JSON (so the map {"b":"2","a":"1"} and the string {"a":"1","b":"2"} are the same context). The same context is needed to decrypt */
                context?: string | {
                    [key: string]: string;
                };
            }[];
            /**
             * @description standard (recommended): the envelope parts as separate fields. legacy: the whole envelope as one Base64 string in `ciphertext`, for clients of older single-string formats; not recommended for new integrations (docs/envelope-format.md)
             * @default standard
             * @enum {string}
             */
            mode?: "standard" | "legacy";
        };
        EncryptBatchResponse: {
            /** @description One result per item, in request order */
            results: ({
                /** @enum {boolean} */
                ok: true;
                /**
                 * Format: byte
                 * @description AES-256-GCM ciphertext, Base64 (legacy mode: the whole compact envelope)
                 */
                ciphertext: string;
                /**
                 * Format: byte
                 * @description Header (format, scheme, key id, key version) and the protected DEK (ML-KEM or X-Wing ciphertext, RSA-OAEP- or AES-GCM-sealed DEK), Base64 (absent in legacy mode)
                 */
                encapsulatedKey?: string;
                /**
                 * Format: byte
                 * @description AES-GCM nonce (12 bytes), Base64 (absent in legacy mode)
                 */
                nonce?: string;
                /**
                 * Format: byte
                 * @description AES-GCM authentication tag (16 bytes), Base64 (absent in legacy mode)
                 */
                tag?: string;
                /**
                 * Format: uuid
                 * @description The key used
                 */
                keyId: string;
                keyVersion: number;
                /** @enum {string} */
                mode?: "legacy";
            } | {
                /** @enum {boolean} */
                ok: false;
                /** @description The error code a single request would have had */
                error: string;
                message: string;
            })[];
        };
        DecryptBatchRequest: {
            items: {
                /** @description The key that encrypted (optional: the envelope names it): the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
                keyId?: string;
                /** @description Cross-check of the version the envelope names */
                keyVersion?: number;
                /**
                 * Format: byte
                 * @description From the encrypt response
                 */
                ciphertext: string;
                /**
                 * Format: byte
                 * @description From the encrypt response (standard mode)
                 */
                encapsulatedKey?: string;
                /**
                 * Format: byte
                 * @description From the encrypt response (standard mode)
                 */
                nonce?: string;
                /**
                 * Format: byte
                 * @description From the encrypt response (standard mode)
                 */
                tag?: string;
                /** @description Additional authenticated data: a string, or a map of string to string bound as its canonical JSON (so the map {"b":"2","a":"1"} and the string {"a":"1","b":"2"} are the same context). The same context is needed to decrypt */
                context?: string | {
                    [key: string]: string;
                };
                /** @enum {boolean} */
                ok?: true;
                /**
                 * Format: uuid
                 * @description From a re-encrypt answer: the key it re-encrypted from (ignored: the envelope names its key)
                 */
                sourceKeyId?: string;
                /** @description From a re-encrypt answer: the version it re-encrypted from (ignored) */
                sourceKeyVersion?: number;
                /**
                 * @description Overrides the batch mode for this item
                 * @enum {string}
                 */
                mode?: "standard" | "legacy";
            }[];
            /**
             * @description standard (recommended): the envelope parts as separate fields. legacy: the whole envelope as one Base64 string in `ciphertext`, for clients of older single-string formats; not recommended for new integrations (docs/envelope-format.md)
             * @default standard
             * @enum {string}
             */
            mode?: "standard" | "legacy";
        };
        DecryptBatchResponse: {
            /** @description One result per item, in request order */
            results: ({
                /** @enum {boolean} */
                ok: true;
                /**
                 * Format: byte
                 * @description Base64
                 */
                plaintext: string;
                /**
                 * Format: uuid
                 * @description The key that decrypted
                 */
                keyId: string;
                keyVersion: number;
            } | {
                /** @enum {boolean} */
                ok: false;
                /** @description The error code a single request would have had */
                error: string;
                message: string;
            })[];
        };
        SignRequest: {
            /** @description Signing key (default: the tenant default Signing key): the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
            keyId?: string;
            /**
             * Format: byte
             * @description The message (or its digest), Base64
             */
            message: string;
            /**
             * @description RAW: message is the data itself. DIGEST: message is its hash (SHA-256 for RSA; SHA-256/384/512 for EC P-256/384/521); RSA and ECDSA only
             * @default RAW
             * @enum {string}
             */
            messageType?: "RAW" | "DIGEST";
            /**
             * @description RSA keys: RSASSA-PSS (SHA-256, MGF1-SHA-256, 32-byte salt) or RSASSA-PKCS1-v1_5 with SHA-256 (default: PSS)
             * @enum {string}
             */
            rsaPadding?: "PSS" | "PKCS1";
            /**
             * @description ECDSA keys: DER-encoded (r, s), or IEEE P1363 fixed-length r || s (default: DER)
             * @enum {string}
             */
            signatureFormat?: "DER" | "P1363";
            /** @description RSA-PSS salt length in bytes (default 32, the SHA-256 length); verify accepts only this length. At most the key allows: 222 for RSA-2048, 350 for RSA-3072, 478 for RSA-4096 */
            saltLength?: number;
            /**
             * Format: byte
             * @description ML-DSA and SLH-DSA keys: the context string (FIPS 204 §5.2, FIPS 205 §10.2), 0 to 255 bytes, Base64; verify needs the same one. Absent: the empty context. Other algorithms: 400
             */
            signatureContext?: string;
            /**
             * @description plain: the signature as Base64. versioned: kms:v<keyVersion>:<Base64>, a signature that names the key version that made it, so verify needs no keyVersion after a rotation (as Vault's vault:v1:)
             * @default plain
             * @enum {string}
             */
            signatureEncoding?: "plain" | "versioned";
        };
        SignResponse: {
            /**
             * Format: byte
             * @description Base64; with signatureEncoding versioned, kms:v<keyVersion>:<Base64>
             */
            signature: string;
            /**
             * Format: uuid
             * @description The key that signed
             */
            keyId: string;
            /** @description The version that signed: pass it to verify once the key has rotated */
            keyVersion: number;
            /** @description The key algorithm */
            algorithm: string;
            /** @description The signature scheme used, e.g. RSASSA-PSS-SHA256 */
            signingScheme: string;
        };
        VerifyRequest: {
            /** @description Signing key (default: the tenant default Signing key): the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
            keyId?: string;
            /** @description The version that signed. Absent: the version a versioned signature names; for a plain signature, every version of the key, newest first (the 100 most recent), the answer naming the one that matched */
            keyVersion?: number;
            /**
             * Format: byte
             * @description The message (or its digest), Base64
             */
            message: string;
            /** @description The signature: Base64, or the versioned form kms:v<keyVersion>:<Base64> that sign answers */
            signature: string;
            /**
             * @description RAW: message is the data itself. DIGEST: message is its hash (SHA-256 for RSA; SHA-256/384/512 for EC P-256/384/521); RSA and ECDSA only
             * @default RAW
             * @enum {string}
             */
            messageType?: "RAW" | "DIGEST";
            /**
             * @description RSA keys: RSASSA-PSS (SHA-256, MGF1-SHA-256, 32-byte salt) or RSASSA-PKCS1-v1_5 with SHA-256 (default: PSS)
             * @enum {string}
             */
            rsaPadding?: "PSS" | "PKCS1";
            /**
             * @description ECDSA keys: DER-encoded (r, s), or IEEE P1363 fixed-length r || s (default: DER)
             * @enum {string}
             */
            signatureFormat?: "DER" | "P1363";
            /** @description RSA-PSS salt length in bytes (default 32, the SHA-256 length); verify accepts only this length. At most the key allows: 222 for RSA-2048, 350 for RSA-3072, 478 for RSA-4096 */
            saltLength?: number;
            /**
             * Format: byte
             * @description ML-DSA and SLH-DSA keys: the context string (FIPS 204 §5.2, FIPS 205 §10.2), 0 to 255 bytes, Base64; verify needs the same one. Absent: the empty context. Other algorithms: 400
             */
            signatureContext?: string;
            /** @description From the sign or mac answer; informational (the key decides) */
            algorithm?: string;
            /** @description From the sign answer: sets rsaPadding (RSASSA-PSS / RSASSA-PKCS1-v1_5) and signatureFormat (ECDSA-...-DER / -P1363) when they are absent */
            signingScheme?: string;
        };
        VerifyResponse: {
            valid: boolean;
            /**
             * Format: uuid
             * @description The key used
             */
            keyId: string;
            /** @description The version used: the one named (keyVersion or a versioned signature), else the one that matched; when none did, the current version */
            keyVersion: number;
        };
        MacRequest: {
            /**
             * Format: byte
             * @description The message (or its digest), Base64
             */
            data: string;
            /** @description Truncate the MAC to its leftmost macLength bytes (RFC 2104 §5): 16 up to the full length (32, 48 or 64 for HMAC-SHA256/384/512). Absent: the full MAC. Verify compares that many bytes */
            macLength?: number;
        };
        MacResponse: {
            /**
             * Format: byte
             * @description Base64
             */
            mac: string;
            /**
             * Format: uuid
             * @description The HMAC key
             */
            keyId: string;
            /** @description The version that computed the MAC: pass it to verify after a rotation */
            keyVersion: number;
            algorithm: string;
        };
        MacVerifyRequest: {
            /**
             * Format: byte
             * @description The message (or its digest), Base64
             */
            data: string;
            /**
             * Format: byte
             * @description The MAC, Base64
             */
            mac: string;
            /** @description The version that computed the MAC. Absent: every version of the key, newest first (the 100 most recent), the answer naming the one that matched */
            keyVersion?: number;
            /** @description From the mac answer: must be the key of the path: the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
            keyId?: string;
            /** @description From the sign or mac answer; informational (the key decides) */
            algorithm?: string;
            /** @description Truncate the MAC to its leftmost macLength bytes (RFC 2104 §5): 16 up to the full length (32, 48 or 64 for HMAC-SHA256/384/512). Absent: the full MAC. Verify compares that many bytes */
            macLength?: number;
        };
        GenerateDataKeyRequest: {
            /** @description Encryption key (default: the tenant default Encryption key): the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
            keyId?: string;
        };
        DataKeyResponse: {
            /**
             * Format: byte
             * @description The data key, Base64: use it locally, then discard it (absent when withPlaintext is false)
             */
            plaintextDek?: string;
            /**
             * Format: byte
             * @description The data key wrapped by the key (compact envelope, Base64): store it; POST /keys/{keyId}/unwrap recovers the data key, with the same context
             */
            encryptedDek: string;
            /**
             * Format: uuid
             * @description The wrapping key
             */
            keyId: string;
            /** @description The wrapping key version */
            keyVersion: number;
            /** @description Data key length in bytes */
            keyBytes: number;
        };
        DataKeyRequest: {
            /**
             * @description Data key length: 16, 24 or 32 bytes (AES-128/192/256)
             * @default 32
             */
            keyBytes?: 16 | 24 | 32;
            /**
             * @description Include the plaintext data key in the response
             * @default true
             */
            withPlaintext?: boolean;
            /** @description Additional authenticated data: a string, or a map of string to string bound as its canonical JSON (so the map {"b":"2","a":"1"} and the string {"a":"1","b":"2"} are the same context). The same context is needed to decrypt */
            context?: string | {
                [key: string]: string;
            };
        };
        WrapRequest: {
            /**
             * Format: byte
             * @description Key material to wrap, Base64 (up to 64 KiB)
             */
            plaintext: string;
            /** @description Additional authenticated data: a string, or a map of string to string bound as its canonical JSON (so the map {"b":"2","a":"1"} and the string {"a":"1","b":"2"} are the same context). The same context is needed to decrypt */
            context?: string | {
                [key: string]: string;
            };
        };
        WrapResponse: {
            /**
             * Format: byte
             * @description Compact envelope, Base64: give it to unwrap with the same context
             */
            wrappedKey: string;
            /**
             * Format: uuid
             * @description The wrapping key
             */
            keyId: string;
            /** @description The wrapping key version */
            keyVersion: number;
        };
        UnwrapRequest: {
            /**
             * Format: byte
             * @description From wrap (wrappedKey); give this or encryptedDek
             */
            wrappedKey?: string;
            /**
             * Format: byte
             * @description From a data-key endpoint (encryptedDek); give this or wrappedKey
             */
            encryptedDek?: string;
            /** @description Additional authenticated data: a string, or a map of string to string bound as its canonical JSON (so the map {"b":"2","a":"1"} and the string {"a":"1","b":"2"} are the same context). The same context is needed to decrypt */
            context?: string | {
                [key: string]: string;
            };
            /** @description From the wrap or data-key answer: must be the key of the path: the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
            keyId?: string;
            /** @description From the wrap or data-key answer: cross-check of the envelope */
            keyVersion?: number;
            /** @description From a data-key answer: the expected length */
            keyBytes?: number;
            /** @description From a data-key answer; ignored (accepted so the answer can be passed back as it is) */
            plaintextDek?: string;
            /**
             * Format: uuid
             * @description From a re-encrypt answer: the key it re-encrypted from (ignored: the envelope names its key)
             */
            sourceKeyId?: string;
            /** @description From a re-encrypt answer: the version it re-encrypted from (ignored) */
            sourceKeyVersion?: number;
        };
        UnwrapResponse: {
            /**
             * Format: byte
             * @description The unwrapped key material, Base64
             */
            plaintext: string;
            /**
             * Format: uuid
             * @description The wrapping key
             */
            keyId: string;
            /** @description The wrapping key version */
            keyVersion: number;
        };
        ReEncryptRequest: {
            /**
             * Format: byte
             * @description From an /encrypt answer (legacy mode: the whole compact envelope)
             */
            ciphertext?: string;
            /**
             * Format: byte
             * @description From an /encrypt answer (standard mode)
             */
            encapsulatedKey?: string;
            /**
             * Format: byte
             * @description From an /encrypt answer (standard mode)
             */
            nonce?: string;
            /**
             * Format: byte
             * @description From an /encrypt answer (standard mode)
             */
            tag?: string;
            /**
             * @description The mode of the /encrypt answer given (default standard); the new envelope is answered in the same mode
             * @enum {string}
             */
            mode?: "standard" | "legacy";
            /**
             * Format: byte
             * @description From a wrap answer; the new wrapped key is answered as wrappedKey
             */
            wrappedKey?: string;
            /**
             * Format: byte
             * @description From a data-key answer; the new encrypted data key is answered as encryptedDek
             */
            encryptedDek?: string;
            /** @description Cross-check: the key the envelope names (the answer given names it so): the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
            keyId?: string;
            /** @description Cross-check: the key version the envelope names */
            keyVersion?: number;
            /** @description From a data-key answer: the data key length, checked against the envelope */
            keyBytes?: number;
            /** @description From a data-key answer; ignored (accepted so the answer can be passed as it is) */
            plaintextDek?: string;
            /**
             * Format: uuid
             * @description From a re-encrypt answer: the key it re-encrypted from (ignored: the envelope names its key)
             */
            sourceKeyId?: string;
            /** @description From a re-encrypt answer: the version it re-encrypted from (ignored) */
            sourceKeyVersion?: number;
            /** @description Additional authenticated data: a string, or a map of string to string bound as its canonical JSON (so the map {"b":"2","a":"1"} and the string {"a":"1","b":"2"} are the same context). The same context is needed to decrypt */
            context?: string | {
                [key: string]: string;
            };
            /** @description Additional authenticated data: a string, or a map of string to string bound as its canonical JSON (so the map {"b":"2","a":"1"} and the string {"a":"1","b":"2"} are the same context). The same context is needed to decrypt */
            destinationContext?: string | {
                [key: string]: string;
            };
            /** @description The key to re-encrypt under (default: the tenant default Encryption key); may be the source key, for its current version: the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
            destinationKeyId?: string;
        };
        ReEncryptResponse: {
            /**
             * Format: byte
             * @description AES-256-GCM ciphertext, Base64 (legacy mode: the whole compact envelope); /encrypt answers
             */
            ciphertext?: string;
            /**
             * Format: byte
             * @description As /encrypt answers it (standard mode)
             */
            encapsulatedKey?: string;
            /**
             * Format: byte
             * @description As /encrypt answers it (standard mode)
             */
            nonce?: string;
            /**
             * Format: byte
             * @description As /encrypt answers it (standard mode)
             */
            tag?: string;
            /** @enum {string} */
            mode?: "legacy";
            /**
             * Format: byte
             * @description For a wrappedKey given: the new wrapped key (compact envelope)
             */
            wrappedKey?: string;
            /**
             * Format: byte
             * @description For an encryptedDek given: the new encrypted data key (compact envelope)
             */
            encryptedDek?: string;
            /** @description For an encryptedDek given: the data key length */
            keyBytes?: number;
            /**
             * Format: uuid
             * @description The destination key: the key the new envelope names
             */
            keyId: string;
            /** @description The destination key version (also inside the envelope) */
            keyVersion: number;
            /**
             * Format: uuid
             * @description The key the envelope given was under
             */
            sourceKeyId: string;
            /** @description The version the envelope given was under */
            sourceKeyVersion: number;
        };
        ReEncryptBatchRequest: {
            items: {
                /**
                 * Format: byte
                 * @description From an /encrypt answer (legacy mode: the whole compact envelope)
                 */
                ciphertext?: string;
                /**
                 * Format: byte
                 * @description From an /encrypt answer (standard mode)
                 */
                encapsulatedKey?: string;
                /**
                 * Format: byte
                 * @description From an /encrypt answer (standard mode)
                 */
                nonce?: string;
                /**
                 * Format: byte
                 * @description From an /encrypt answer (standard mode)
                 */
                tag?: string;
                /**
                 * @description The mode of the /encrypt answer given (default standard); the new envelope is answered in the same mode
                 * @enum {string}
                 */
                mode?: "standard" | "legacy";
                /**
                 * Format: byte
                 * @description From a wrap answer; the new wrapped key is answered as wrappedKey
                 */
                wrappedKey?: string;
                /**
                 * Format: byte
                 * @description From a data-key answer; the new encrypted data key is answered as encryptedDek
                 */
                encryptedDek?: string;
                /** @description Cross-check: the key the envelope names (the answer given names it so): the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
                keyId?: string;
                /** @description Cross-check: the key version the envelope names */
                keyVersion?: number;
                /** @description From a data-key answer: the data key length, checked against the envelope */
                keyBytes?: number;
                /** @description From a data-key answer; ignored (accepted so the answer can be passed as it is) */
                plaintextDek?: string;
                /**
                 * Format: uuid
                 * @description From a re-encrypt answer: the key it re-encrypted from (ignored: the envelope names its key)
                 */
                sourceKeyId?: string;
                /** @description From a re-encrypt answer: the version it re-encrypted from (ignored) */
                sourceKeyVersion?: number;
                /** @description Additional authenticated data: a string, or a map of string to string bound as its canonical JSON (so the map {"b":"2","a":"1"} and the string {"a":"1","b":"2"} are the same context). The same context is needed to decrypt */
                context?: string | {
                    [key: string]: string;
                };
                /** @description Additional authenticated data: a string, or a map of string to string bound as its canonical JSON (so the map {"b":"2","a":"1"} and the string {"a":"1","b":"2"} are the same context). The same context is needed to decrypt */
                destinationContext?: string | {
                    [key: string]: string;
                };
                /** @description The key to re-encrypt under (default: the tenant default Encryption key); may be the source key, for its current version; overrides the batch's destinationKeyId: the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
                destinationKeyId?: string;
                /** @enum {boolean} */
                ok?: true;
            }[];
            /** @description The key of every item that names none (default: the tenant default Encryption key): the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
            destinationKeyId?: string;
            /**
             * @description The mode of the /encrypt answers given, for items that name none
             * @default standard
             * @enum {string}
             */
            mode?: "standard" | "legacy";
        };
        ReEncryptBatchResponse: {
            /** @description One result per item, in request order */
            results: ({
                /** @enum {boolean} */
                ok: true;
                /**
                 * Format: byte
                 * @description AES-256-GCM ciphertext, Base64 (legacy mode: the whole compact envelope); /encrypt answers
                 */
                ciphertext?: string;
                /**
                 * Format: byte
                 * @description As /encrypt answers it (standard mode)
                 */
                encapsulatedKey?: string;
                /**
                 * Format: byte
                 * @description As /encrypt answers it (standard mode)
                 */
                nonce?: string;
                /**
                 * Format: byte
                 * @description As /encrypt answers it (standard mode)
                 */
                tag?: string;
                /** @enum {string} */
                mode?: "legacy";
                /**
                 * Format: byte
                 * @description For a wrappedKey given: the new wrapped key (compact envelope)
                 */
                wrappedKey?: string;
                /**
                 * Format: byte
                 * @description For an encryptedDek given: the new encrypted data key (compact envelope)
                 */
                encryptedDek?: string;
                /** @description For an encryptedDek given: the data key length */
                keyBytes?: number;
                /**
                 * Format: uuid
                 * @description The destination key: the key the new envelope names
                 */
                keyId: string;
                /** @description The destination key version (also inside the envelope) */
                keyVersion: number;
                /**
                 * Format: uuid
                 * @description The key the envelope given was under
                 */
                sourceKeyId: string;
                /** @description The version the envelope given was under */
                sourceKeyVersion: number;
            } | {
                /** @enum {boolean} */
                ok: false;
                /** @description The error code a single request would have had */
                error: string;
                message: string;
            })[];
        };
        RawEncryptRequest: {
            /**
             * Format: byte
             * @description The plaintext, Base64 (up to 65,536 bytes)
             */
            plaintext: string;
            /**
             * Format: byte
             * @description Additional authenticated data, Base64 (up to 65,536 bytes); absent: none
             */
            aad?: string;
        };
        RawEncryptResponse: {
            /**
             * Format: byte
             * @description AES-GCM ciphertext, as long as the plaintext
             */
            ciphertext: string;
            /**
             * Format: byte
             * @description The 12-byte IV the service drew
             */
            iv: string;
            /**
             * Format: byte
             * @description The 16-byte authentication tag
             */
            tag: string;
            /**
             * Format: uuid
             * @description Key id
             */
            keyId: string;
            /** @description The key version used */
            keyVersion: number;
        };
        RawDecryptRequest: {
            /**
             * Format: byte
             * @description The ciphertext, Base64 (up to 65,536 bytes)
             */
            ciphertext: string;
            /**
             * Format: byte
             * @description The IV, Base64: 1 to 128 bytes (12 is GCM's standard length)
             */
            iv: string;
            /**
             * Format: byte
             * @description The 16-byte authentication tag, Base64
             */
            tag: string;
            /**
             * Format: byte
             * @description Additional authenticated data, Base64 (up to 65,536 bytes); absent: none
             */
            aad?: string;
            /** @description The key version that encrypted (from raw-encrypt); absent: the current one */
            keyVersion?: number;
            /** @description From the raw-encrypt answer: must be the key of the path: the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
            keyId?: string;
        };
        RawDecryptResponse: {
            /**
             * Format: byte
             * @description The plaintext
             */
            plaintext: string;
            /**
             * Format: uuid
             * @description Key id
             */
            keyId: string;
            /** @description The key version used */
            keyVersion: number;
        };
        CreateSecretRequest: {
            /** @description Unique within its folder among secrets not deleted */
            name: string;
            /** @description The secret value (UTF-8 text) */
            value: string;
            /** @description Free text, stored in clear */
            description?: string;
            /** @description null clears */
            notes?: string | null;
            /** @description Tags (a set) */
            labels?: string[];
            /** @description Replaces every custom field */
            customFields?: {
                /** @description Unique within the secret */
                name: string;
                /**
                 * @default text
                 * @enum {string}
                 */
                type: "text" | "number" | "boolean" | "url" | "email" | "date";
                /** @description A string for text, url, email and date (YYYY-MM-DD); a number; a boolean */
                value: string | number | boolean;
                /**
                 * @description Sealed at rest like the value, and shown only with include=all
                 * @default false
                 */
                sensitive: boolean;
            }[];
            /** @description null: top level */
            folderId?: string | null;
            expiresAt?: string | null;
            /** @description An inactive secret refuses value reads */
            isActive?: boolean;
            isFavorite?: boolean;
            isTravelSafe?: boolean;
            /** @description null removes the seed */
            totp?: {
                /** @description The Base32 seed */
                secret?: string;
                /** @description An otpauth://totp/ URI instead of secret */
                uri?: string;
                /**
                 * @description Default SHA1
                 * @enum {string}
                 */
                algorithm?: "SHA1" | "SHA256" | "SHA512";
                /** @description Default 6 */
                digits?: number;
                /** @description Seconds; default 30 */
                period?: number;
            } | null;
        };
        /**
         * Secret
         * @description id, name and version always; the rest as include selects
         */
        SecretView: {
            /**
             * Format: uuid
             * @description Secret id
             */
            id: string;
            name: string;
            /** @description Current value version */
            version: number;
            /** @description With include=all */
            value?: string;
            customFields?: {
                name: string;
                /** @enum {string} */
                type: "text" | "number" | "boolean" | "url" | "email" | "date";
                sensitive: boolean;
                /** @description null for a sensitive field unless include=all */
                value: (string | number | boolean) | null;
            }[];
            notes?: string | null;
            labels?: string[];
            description?: string;
            expiresAt?: string | null;
            folderId?: string | null;
            isActive?: boolean;
            isFavorite?: boolean;
            hasTotp?: boolean;
            isTravelSafe?: boolean;
            /**
             * Format: date-time
             * @description Creation
             */
            createdAt?: string;
            /**
             * Format: date-time
             * @description Last change
             */
            updatedAt?: string;
            createdBy?: string;
            updatedBy?: string;
            /**
             * Format: date-time
             * @description In the list of deleted secrets: when it was deleted
             */
            deletedAt?: string;
            /**
             * Format: date-time
             * @description In the list of deleted secrets: when it is purged for good
             */
            purgeAt?: string;
        };
        SecretList: {
            data: components["schemas"]["SecretView"][];
            /** @description Secrets matching the filters */
            total: number;
            limit: number;
            offset: number;
        };
        MoveSecretsRequest: {
            secretIds: string[];
            /** @description null: top level */
            folderId: string | null;
        };
        UpdateSecretRequest: {
            /** @description Unique within its folder among secrets not deleted */
            name?: string;
            /** @description The secret value (UTF-8 text) */
            value?: string;
            /** @description Free text, stored in clear */
            description?: string;
            /** @description null clears */
            notes?: string | null;
            /** @description Tags (a set) */
            labels?: string[];
            /** @description Replaces every custom field */
            customFields?: {
                /** @description Unique within the secret */
                name: string;
                /**
                 * @default text
                 * @enum {string}
                 */
                type: "text" | "number" | "boolean" | "url" | "email" | "date";
                /** @description A string for text, url, email and date (YYYY-MM-DD); a number; a boolean */
                value: string | number | boolean;
                /**
                 * @description Sealed at rest like the value, and shown only with include=all
                 * @default false
                 */
                sensitive: boolean;
            }[];
            /** @description null: top level */
            folderId?: string | null;
            expiresAt?: string | null;
            /** @description An inactive secret refuses value reads */
            isActive?: boolean;
            isFavorite?: boolean;
            isTravelSafe?: boolean;
            /** @description null removes the seed */
            totp?: {
                /** @description The Base32 seed */
                secret?: string;
                /** @description An otpauth://totp/ URI instead of secret */
                uri?: string;
                /**
                 * @description Default SHA1
                 * @enum {string}
                 */
                algorithm?: "SHA1" | "SHA256" | "SHA512";
                /** @description Default 6 */
                digits?: number;
                /** @description Seconds; default 30 */
                period?: number;
            } | null;
        };
        SecretVersion: {
            version: number;
            /**
             * Format: date-time
             * @description When this value was set
             */
            createdAt: string;
            createdBy: string;
            isCurrent: boolean;
            /** @description With include=all */
            value?: string;
        };
        SecretVersionList: {
            data: components["schemas"]["SecretVersion"][];
        };
        TotpCode: {
            code: string;
            /** @enum {string} */
            algorithm: "SHA1" | "SHA256" | "SHA512";
            digits: number;
            period: number;
            /**
             * Format: date-time
             * @description Start of the code time step
             */
            validFrom: string;
            /**
             * Format: date-time
             * @description End of the code time step
             */
            validUntil: string;
            remainingSeconds: number;
        };
        CreateFolderRequest: {
            /** @description Unique among its siblings; no / */
            name: string;
            parentId?: string | null;
        };
        /** Folder */
        FolderView: {
            /**
             * Format: uuid
             * @description Folder id
             */
            id: string;
            name: string;
            parentId: string | null;
            /** @description Names from the top, joined by / */
            path: string;
            /**
             * Format: date-time
             * @description Creation
             */
            createdAt: string;
            /**
             * Format: date-time
             * @description Last change
             */
            updatedAt: string;
            createdBy: string;
            updatedBy: string;
        };
        FolderList: {
            data: components["schemas"]["FolderView"][];
            total: number;
            limit: number;
            offset: number;
        };
        UpdateFolderRequest: {
            /** @description Unique among its siblings; no / */
            name?: string;
            /** @description null: top level */
            parentId?: string | null;
        };
        Me: {
            /**
             * Format: uuid
             * @description The signed-in person’s account
             */
            accountId: string;
            email: string;
            displayName: string | null;
            /**
             * Format: uuid
             * @description The tenant this access token is for
             */
            tenantId: string;
            /** @description Every tenant the person is a member of, oldest membership first */
            memberships: {
                /**
                 * Format: uuid
                 * @description A tenant the person belongs to
                 */
                tenantId: string;
                tenantName: string;
                /**
                 * @description A role in the tenant (docs/identity.md "The model")
                 * @enum {string}
                 */
                role: "tenant:viewer" | "tenant:developer" | "tenant:admin" | "tenant:owner";
                /**
                 * @description The resource indicator to ask the provider for, for a token of this tenant
                 * @example urn:kms:tenant:0b6f3c7e-8d2a-4c1e-9f5b-2a7d4e6c8b10
                 */
                resource: string;
            }[];
        };
        TeamMember: {
            /**
             * Format: uuid
             * @description The member’s account
             */
            accountId: string;
            email: string;
            displayName: string | null;
            /**
             * @description A role in the tenant (docs/identity.md "The model")
             * @enum {string}
             */
            role: "tenant:viewer" | "tenant:developer" | "tenant:admin" | "tenant:owner";
            /**
             * Format: date-time
             * @description When the person became a member
             */
            createdAt: string;
        };
        TeamMemberList: {
            data: components["schemas"]["TeamMember"][];
            total: number;
        };
        ChangeMemberRole: {
            /**
             * @description A role in the tenant (docs/identity.md "The model")
             * @enum {string}
             */
            role: "tenant:viewer" | "tenant:developer" | "tenant:admin" | "tenant:owner";
        };
        CreateInvitation: {
            /** @description An e-mail address */
            email: string;
            /**
             * @description A role in the tenant (docs/identity.md "The model")
             * @enum {string}
             */
            role: "tenant:viewer" | "tenant:developer" | "tenant:admin" | "tenant:owner";
        };
        Invitation: {
            /**
             * Format: uuid
             * @description The invitation
             */
            invitationId: string;
            email: string;
            /**
             * @description A role in the tenant (docs/identity.md "The model")
             * @enum {string}
             */
            role: "tenant:viewer" | "tenant:developer" | "tenant:admin" | "tenant:owner";
            /**
             * Format: date-time
             * @description When the link stops working
             */
            expiresAt: string;
            /**
             * @description queued until the job process has sent the e-mail; sent or failed after
             * @enum {string}
             */
            emailDispatchStatus: "queued" | "sent" | "failed";
            /** @description Why the last send failed: smtp_not_configured, smtp_refused, smtp_timeout, smtp_unreachable, smtp_auth_failed, smtp_failed */
            emailDispatchError: string | null;
            /** @enum {string} */
            status: "pending" | "accepted" | "revoked" | "expired";
            /**
             * Format: date-time
             * @description When the invitation was made
             */
            createdAt: string;
        };
        InvitationList: {
            data: components["schemas"]["Invitation"][];
            total: number;
        };
        /** @description TOTP, e-mail OTP, SMS OTP (SMS OTP off for new tenants) */
        MfaMethods: {
            totp: {
                /** @description Members and end-users may use the method */
                enabled: boolean;
                /** @description Sign-in demands it (it must be enabled) */
                required: boolean;
            };
            emailOtp: {
                /** @description Members and end-users may use the method */
                enabled: boolean;
                /** @description Sign-in demands it (it must be enabled) */
                required: boolean;
            };
            smsOtp: {
                /** @description Members and end-users may use the method */
                enabled: boolean;
                /** @description Sign-in demands it (it must be enabled) */
                required: boolean;
            };
        };
        SecuritySettings: {
            /** @description TOTP, e-mail OTP, SMS OTP (SMS OTP off for new tenants) */
            mfaMethods: components["schemas"]["MfaMethods"];
            /** @description What a password of the tenant’s realm must have; at most 256 characters always */
            passwordPolicy: {
                /** @description Shortest password (8 to 128; default 12) */
                minLength: number;
                requireUppercase: boolean;
                requireLowercase: boolean;
                requireDigit: boolean;
                requireSymbol: boolean;
            };
            /** @description Lifetimes of what a sign-in gives */
            sessionLifetimes: {
                /** @description Access token lifetime (60 to 3600; default 900) */
                accessTokenSeconds: number;
                /** @description Refresh token lifetime (300 s to 30 days; default 14 days) */
                refreshTokenSeconds: number;
                /** @description Idle time before a session ends (300 s to 7 days; default 1 day) */
                idleSignOutSeconds: number;
            };
            /** @description Rules for new API keys */
            apiKeyPolicy: {
                /** @description Longest lifetime of a new API key in days (1 to 3650); null: no maximum (default) */
                maxLifetimeDays: number | null;
            };
        };
        /** @description Only what is given changes: groups and fields left out keep their values */
        SecuritySettingsPatch: {
            mfaMethods?: {
                totp?: {
                    /** @description Members and end-users may use the method */
                    enabled?: boolean;
                    /** @description Sign-in demands it (it must be enabled) */
                    required?: boolean;
                };
                emailOtp?: {
                    /** @description Members and end-users may use the method */
                    enabled?: boolean;
                    /** @description Sign-in demands it (it must be enabled) */
                    required?: boolean;
                };
                smsOtp?: {
                    /** @description Members and end-users may use the method */
                    enabled?: boolean;
                    /** @description Sign-in demands it (it must be enabled) */
                    required?: boolean;
                };
            };
            passwordPolicy?: {
                /** @description Shortest password (8 to 128; default 12) */
                minLength?: number;
                requireUppercase?: boolean;
                requireLowercase?: boolean;
                requireDigit?: boolean;
                requireSymbol?: boolean;
            };
            sessionLifetimes?: {
                /** @description Access token lifetime (60 to 3600; default 900) */
                accessTokenSeconds?: number;
                /** @description Refresh token lifetime (300 s to 30 days; default 14 days) */
                refreshTokenSeconds?: number;
                /** @description Idle time before a session ends (300 s to 7 days; default 1 day) */
                idleSignOutSeconds?: number;
            };
            apiKeyPolicy?: {
                /** @description Longest lifetime of a new API key in days (1 to 3650); null: no maximum (default) */
                maxLifetimeDays?: number | null;
            };
        };
        LoginPanel: {
            /** @description An https image shown in the panel (the pages’ CSP allows https images) */
            imageUrl?: string;
            /** @description Title and text per locale: en, es, fr, de, it */
            translations?: {
                en?: {
                    /** @description The panel’s heading */
                    title: string;
                    /** @description The panel’s text */
                    text: string;
                };
                es?: {
                    /** @description The panel’s heading */
                    title: string;
                    /** @description The panel’s text */
                    text: string;
                };
                fr?: {
                    /** @description The panel’s heading */
                    title: string;
                    /** @description The panel’s text */
                    text: string;
                };
                de?: {
                    /** @description The panel’s heading */
                    title: string;
                    /** @description The panel’s text */
                    text: string;
                };
                it?: {
                    /** @description The panel’s heading */
                    title: string;
                    /** @description The panel’s text */
                    text: string;
                };
            };
        };
        UpdateLoginPanel: {
            /** @description An https image shown in the panel (the pages’ CSP allows https images) */
            imageUrl?: string;
            /** @description Title and text per locale: en, es, fr, de, it */
            translations?: {
                en?: {
                    /** @description The panel’s heading */
                    title: string;
                    /** @description The panel’s text */
                    text: string;
                };
                es?: {
                    /** @description The panel’s heading */
                    title: string;
                    /** @description The panel’s text */
                    text: string;
                };
                fr?: {
                    /** @description The panel’s heading */
                    title: string;
                    /** @description The panel’s text */
                    text: string;
                };
                de?: {
                    /** @description The panel’s heading */
                    title: string;
                    /** @description The panel’s text */
                    text: string;
                };
                it?: {
                    /** @description The panel’s heading */
                    title: string;
                    /** @description The panel’s text */
                    text: string;
                };
            };
        };
        /** @description The sign-in pages’ panel for this application */
        ApplicationBranding: {
            loginPanel: components["schemas"]["LoginPanel"];
        };
        Application: {
            /**
             * Format: uuid
             * @description The application
             */
            id: string;
            name: string;
            /**
             * @description spa and native: public clients (PKCE, no secret); traditional and machine_to_machine: confidential (a secret, shown once); machine_to_machine has no redirect URIs
             * @enum {string}
             */
            applicationType: "spa" | "traditional" | "native" | "machine_to_machine";
            /** @description The OAuth client_id */
            clientId: string;
            hasClientSecret: boolean;
            clientSecretRotatedAt: string | null;
            redirectUris: string[];
            postLogoutRedirectUris: string[];
            /** @description RFC 8707 resource indicators the application may ask tokens for */
            resources: string[];
            /** @description The application’s MFA methods, replacing the tenant’s in full; null: the tenant’s */
            mfaMethods: components["schemas"]["MfaMethods"] | null;
            /** @description null: the tenant’s panel, then the defaults */
            branding: components["schemas"]["ApplicationBranding"] | null;
            /** @description People may create their own account on its sign-in pages */
            signUpEnabled: boolean;
            /**
             * Format: date-time
             * @description Created
             */
            createdAt: string;
            /**
             * Format: date-time
             * @description Last changed
             */
            updatedAt: string;
        };
        ApplicationList: {
            data: components["schemas"]["Application"][];
            total: number;
        };
        CreateApplication: {
            /** @description A name for people */
            name: string;
            /**
             * @description spa and native: public clients (PKCE, no secret); traditional and machine_to_machine: confidential (a secret, shown once); machine_to_machine has no redirect URIs
             * @enum {string}
             */
            applicationType: "spa" | "traditional" | "native" | "machine_to_machine";
            /** @description Where the provider may send the browser back: at least one, except for machine_to_machine (none; absent is fine) */
            redirectUris?: string[];
            /** @description Where the browser may go after sign-out */
            postLogoutRedirectUris?: string[];
            /** @description RFC 8707 resource indicators (absolute URIs) */
            resources?: string[];
            /** @description Absent or null: the tenant’s MFA methods apply */
            mfaMethods?: components["schemas"]["MfaMethods"] | null;
            /** @description Absent or null: the tenant’s panel applies */
            branding?: components["schemas"]["ApplicationBranding"] | null;
            /** @description Offer “create an account” on the sign-in page (default false) */
            signUpEnabled?: boolean;
        };
        ApplicationWithSecret: {
            /**
             * Format: uuid
             * @description The application
             */
            id: string;
            name: string;
            /**
             * @description spa and native: public clients (PKCE, no secret); traditional and machine_to_machine: confidential (a secret, shown once); machine_to_machine has no redirect URIs
             * @enum {string}
             */
            applicationType: "spa" | "traditional" | "native" | "machine_to_machine";
            /** @description The OAuth client_id */
            clientId: string;
            hasClientSecret: boolean;
            clientSecretRotatedAt: string | null;
            redirectUris: string[];
            postLogoutRedirectUris: string[];
            /** @description RFC 8707 resource indicators the application may ask tokens for */
            resources: string[];
            /** @description The application’s MFA methods, replacing the tenant’s in full; null: the tenant’s */
            mfaMethods: components["schemas"]["MfaMethods"] | null;
            /** @description null: the tenant’s panel, then the defaults */
            branding: components["schemas"]["ApplicationBranding"] | null;
            /** @description People may create their own account on its sign-in pages */
            signUpEnabled: boolean;
            /**
             * Format: date-time
             * @description Created
             */
            createdAt: string;
            /**
             * Format: date-time
             * @description Last changed
             */
            updatedAt: string;
            /** @description Shown this once (confidential types); store it now */
            clientSecret?: string;
        };
        /** @description The application type, ids, secret state and timestamps cannot change: the fields of a read answer may be sent back as read */
        UpdateApplication: {
            /** @description A name for people */
            name: string;
            /** @description Replaces the stored list (absent: none; only machine_to_machine has none) */
            redirectUris?: string[];
            /** @description Replaces the stored list (absent: none) */
            postLogoutRedirectUris?: string[];
            /** @description Absent: the stored resources stay; an empty array clears them */
            resources?: string[];
            /** @description Absent: kept; null: the tenant’s apply again */
            mfaMethods?: components["schemas"]["MfaMethods"] | null;
            /** @description Absent: kept; null: removed */
            branding?: components["schemas"]["ApplicationBranding"] | null;
            /** @description Absent: kept */
            signUpEnabled?: boolean;
            /**
             * Format: uuid
             * @description Read-only: absent, or as read (a different value is 409 read_only_field)
             */
            id?: string;
            /**
             * @description Read-only: absent, or as read (a different value is 409 read_only_field)
             * @enum {string}
             */
            applicationType?: "spa" | "traditional" | "native" | "machine_to_machine";
            /** @description Read-only: absent, or as read (a different value is 409 read_only_field) */
            clientId?: string;
            /** @description Read-only: absent, or as read (a different value is 409 read_only_field) */
            hasClientSecret?: boolean;
            /** @description Read-only: absent, or as read (a different value is 409 read_only_field) */
            clientSecretRotatedAt?: string | null;
            /**
             * Format: date-time
             * @description Read-only: absent, or as read (a different value is 409 read_only_field)
             */
            createdAt?: string;
            /**
             * Format: date-time
             * @description Read-only: absent, or as read (a different value is 409 read_only_field)
             */
            updatedAt?: string;
        };
        EndUser: {
            /**
             * Format: uuid
             * @description The end-user (also the id of their account in the tenant’s realm)
             */
            id: string;
            email: string;
            displayName: string | null;
            /**
             * @description active: may sign in; blocked: may not
             * @enum {string}
             */
            status: "active" | "blocked";
            blockedAt: string | null;
            /**
             * @description api: created with create-without-password; app_creator: the team member who registered an application; sign_up: the sign-in pages; federation: first signed in through a SAML identity provider
             * @enum {string}
             */
            source: "api" | "app_creator" | "sign_up" | "federation";
            /** @description Applications whose end-user list holds the user */
            applicationIds: string[];
            /** @description false until the set-up link is used */
            hasPassword: boolean;
            /**
             * Format: date-time
             * @description Created
             */
            createdAt: string;
            /**
             * Format: date-time
             * @description Last changed
             */
            updatedAt: string;
        };
        EndUserList: {
            data: components["schemas"]["EndUser"][];
            total: number;
        };
        CreateEndUser: {
            /** @description An e-mail address */
            email: string;
            /** @description A name to show */
            displayName?: string;
            /**
             * Format: uuid
             * @description The application the user is for: added to its list; its id is in the set-up link
             */
            applicationId?: string;
        };
        LinkDispatch: {
            /**
             * Format: uuid
             * @description The end-user the link is for
             */
            userId: string;
            /**
             * @description The e-mail is sent in the background; the link is never in this answer
             * @enum {string}
             */
            emailDispatchStatus: "queued";
            /**
             * Format: date-time
             * @description When the link stops working
             */
            linkExpiresAt: string;
        };
        CreatedEndUser: {
            /**
             * Format: uuid
             * @description The end-user (also the id of their account in the tenant’s realm)
             */
            id: string;
            email: string;
            displayName: string | null;
            /**
             * @description active: may sign in; blocked: may not
             * @enum {string}
             */
            status: "active" | "blocked";
            blockedAt: string | null;
            /**
             * @description api: created with create-without-password; app_creator: the team member who registered an application; sign_up: the sign-in pages; federation: first signed in through a SAML identity provider
             * @enum {string}
             */
            source: "api" | "app_creator" | "sign_up" | "federation";
            /** @description Applications whose end-user list holds the user */
            applicationIds: string[];
            /** @description false until the set-up link is used */
            hasPassword: boolean;
            /**
             * Format: date-time
             * @description Created
             */
            createdAt: string;
            /**
             * Format: date-time
             * @description Last changed
             */
            updatedAt: string;
            setupLink: components["schemas"]["LinkDispatch"];
        };
        SendPasswordReset: {
            /**
             * Format: uuid
             * @description The application the reset link names
             */
            applicationId?: string;
        };
        Role: {
            /**
             * Format: uuid
             * @description The role
             */
            id: string;
            /**
             * Format: uuid
             * @description The application the role belongs to
             */
            applicationId: string;
            name: string;
            description: string;
            permissions: string[];
            /**
             * Format: date-time
             * @description Created
             */
            createdAt: string;
            /**
             * Format: date-time
             * @description Last changed
             */
            updatedAt: string;
        };
        RoleList: {
            data: components["schemas"]["Role"][];
            total: number;
        };
        CreateRole: {
            /**
             * Format: uuid
             * @description The application
             */
            applicationId: string;
            /** @description Unique within the application; the value in the tokens’ roles claim (printable ASCII without spaces, quotes or backslashes) */
            name: string;
            /** @description What the role is for */
            description?: string;
            /** @description Permissions as strings, for the application to interpret */
            permissions?: string[];
        };
        UpdateRole: {
            /** @description Unique within the application (printable ASCII without spaces, quotes or backslashes) */
            name: string;
            /** @description Replaces the stored one (absent: empty) */
            description?: string;
            /** @description Permissions as strings, for the application to interpret */
            permissions?: string[];
        };
        EndUserRoles: {
            data: components["schemas"]["Role"][];
        };
        AccessPolicy: {
            /**
             * Format: uuid
             * @description The policy
             */
            id: string;
            name: string;
            description: string;
            /** @description Allow, Deny, AllowWithApproval (a row written before this release may read RequireMfa) */
            action: string;
            priority: number;
            applicationIds: string[];
            endUserIds: string[];
            roleIds: string[];
            ipRanges: string[];
            /**
             * Format: date-time
             * @description Created
             */
            createdAt: string;
            /**
             * Format: date-time
             * @description Last changed
             */
            updatedAt: string;
        };
        AccessPolicyList: {
            data: components["schemas"]["AccessPolicy"][];
            total: number;
        };
        AccessPolicyInput: {
            /** @description What the policy is for */
            name: string;
            /** @description Notes (absent: empty) */
            description?: string;
            /**
             * @description One of Allow, Deny, AllowWithApproval. RequireMfa is not released: 400 action_not_supported
             * @example Deny
             */
            action: string;
            /** @description Evaluation order, lowest first; unique within the tenant (409 priority_taken). Absent: after every other policy of the tenant (their highest priority + 10; 10 for the first) */
            priority?: number;
            /** @description An application the policy applies tos; empty or absent: any */
            applicationIds?: string[];
            /** @description An end-user the policy applies tos; empty or absent: any */
            endUserIds?: string[];
            /** @description A role whose holders the policy applies tos; empty or absent: any */
            roleIds?: string[];
            /** @description Source address ranges (CIDR, IPv4 or IPv6); empty or absent: any address */
            ipRanges?: string[];
        };
        AccessPolicyPatch: {
            /** @description What the policy is for */
            name?: string;
            /** @description Notes (absent: empty) */
            description?: string;
            /**
             * @description One of Allow, Deny, AllowWithApproval. RequireMfa is not released: 400 action_not_supported
             * @example Deny
             */
            action?: string;
            /** @description Evaluation order, lowest first; unique within the tenant (409 priority_taken). Absent: kept */
            priority?: number;
            /** @description An application the policy applies tos; empty or absent: any */
            applicationIds?: string[];
            /** @description An end-user the policy applies tos; empty or absent: any */
            endUserIds?: string[];
            /** @description A role whose holders the policy applies tos; empty or absent: any */
            roleIds?: string[];
            /** @description Source address ranges (CIDR, IPv4 or IPv6); empty or absent: any address */
            ipRanges?: string[];
        };
        AccessRequest: {
            /**
             * Format: uuid
             * @description The request
             */
            id: string;
            /**
             * Format: uuid
             * @description The application the end-user is signing in to
             */
            applicationId: string;
            /**
             * Format: uuid
             * @description The end-user
             */
            endUserId: string;
            /** @description The policy that asked for approval */
            policyId: string | null;
            /** @enum {string} */
            status: "pending" | "approved" | "rejected" | "expired";
            sourceIp: string | null;
            /**
             * Format: date-time
             * @description Asked
             */
            requestedAt: string;
            /**
             * Format: date-time
             * @description A pending request lapses then
             */
            expiresAt: string;
            decidedAt: string | null;
            /** @description member:<id> */
            decidedBy: string | null;
            reason: string | null;
            accessExpiresAt: string | null;
            /** @description The e-mail telling the end-user of the decision */
            emailDispatchStatus: ("queued" | "sent" | "failed") | null;
        };
        AccessRequestList: {
            data: components["schemas"]["AccessRequest"][];
            total: number;
        };
        AccessDecision: {
            /** @description Why; told to the end-user */
            reason?: string;
        };
        SamlIdentityProvider: {
            /**
             * Format: uuid
             * @description The registration
             */
            id: string;
            name: string;
            entityId: string;
            ssoUrl: string;
            /** @description PEM */
            certificate: string;
            /** @description SHA-256 fingerprint of the certificate */
            certificateSha256: string;
            /**
             * Format: date-time
             * @description The certificate expires then
             */
            certificateNotAfter: string;
            attributeMapping: {
                email: string;
                name?: string;
            };
            applicationIds: string[];
            /** @description Trusted to link to end-users who have a password or a factor, by address */
            linkByVerifiedEmail: boolean;
            serviceProvider: {
                /** @description The SP entity id (the audience) to give the IdP */
                entityId: string;
                /** @description The assertion consumer service URL (HTTP-POST) */
                acsUrl: string;
                /** @description The SP metadata for the IdP to import */
                metadataUrl: string;
            };
            /**
             * Format: date-time
             * @description Registered
             */
            createdAt: string;
            /**
             * Format: date-time
             * @description Last changed
             */
            updatedAt: string;
        };
        SamlIdentityProviderList: {
            data: components["schemas"]["SamlIdentityProvider"][];
            total: number;
        };
        SamlIdentityProviderInput: {
            /** @description Shown on the sign-in button ("Sign in with <name>") */
            name: string;
            /** @description The IdP’s entity id: the Issuer of its responses */
            entityId: string;
            /** @description The IdP’s SSO URL (HTTP-Redirect binding); https, or http on localhost */
            ssoUrl: string;
            /** @description The IdP’s signing certificate: a Base64 X.509 body without headers, or a full PEM. 400 invalid_certificate, certificate_expired, certificate_not_yet_valid */
            certificate: string;
            /** @description Which assertion attributes fill the account (default: email from NameID) */
            attributeMapping?: {
                /** @description Carries the e-mail address: an attribute name of the assertion, or NameID */
                email: string;
                /** @description Carries the display name: an attribute name of the assertion, or NameID */
                name?: string;
            };
            /** @description Applications whose sign-in page offers this IdP; empty or absent: every application */
            applicationIds?: string[];
            /**
             * @description Trust this IdP to link its first sign-in of an address to an existing end-user who has a password or a second factor (otherwise that sign-in is refused and the person signs in with their password). Setting or clearing it is audited federation.saml_idp.link_trust. Default false
             * @default false
             */
            linkByVerifiedEmail?: boolean;
        };
        SamlIdentityProviderPatch: {
            /** @description Shown on the sign-in button ("Sign in with <name>") */
            name?: string;
            /** @description The IdP’s entity id: the Issuer of its responses */
            entityId?: string;
            /** @description The IdP’s SSO URL (HTTP-Redirect binding); https, or http on localhost */
            ssoUrl?: string;
            /** @description The IdP’s signing certificate: a Base64 X.509 body without headers, or a full PEM. 400 invalid_certificate, certificate_expired, certificate_not_yet_valid */
            certificate?: string;
            /** @description Which assertion attributes fill the account (default: email from NameID) */
            attributeMapping?: {
                /** @description Carries the e-mail address: an attribute name of the assertion, or NameID */
                email: string;
                /** @description Carries the display name: an attribute name of the assertion, or NameID */
                name?: string;
            };
            /** @description Applications whose sign-in page offers this IdP; empty or absent: every application */
            applicationIds?: string[];
            /** @description Trust this IdP to link its first sign-in of an address to an existing end-user who has a password or a second factor (otherwise that sign-in is refused and the person signs in with their password). Setting or clearing it is audited federation.saml_idp.link_trust */
            linkByVerifiedEmail?: boolean;
        };
        PlanQuotas: {
            /** @description Cryptographic operations per calendar month; null: no limit */
            operationsPerMonth: number | null;
            /** @description Keys held (not destroyed); null: no limit */
            keys: number | null;
            /** @description Secrets held (not deleted); null: no limit */
            secrets: number | null;
            /** @description End-users; null: no limit */
            endUsers: number | null;
        };
        Plan: {
            id: string;
            name: string;
            /** @description Price per month in minor units (cents) */
            monthlyPriceMinor: number;
            /** @description The same price in major units, two decimals */
            monthlyPrice: number;
            /** @description ISO 4217 */
            currency: string;
            quotas: components["schemas"]["PlanQuotas"];
        };
        PlanList: {
            data: components["schemas"]["Plan"][];
        };
        Subscription: {
            plan: components["schemas"]["Plan"];
            /** @enum {string} */
            status: "active" | "past_due" | "canceled";
            currentPeriod: {
                /**
                 * Format: date-time
                 * @description First instant of the period (UTC)
                 */
                start: string;
                /**
                 * Format: date-time
                 * @description First instant after it
                 */
                end: string;
            };
            nextInvoice: {
                /**
                 * Format: date-time
                 * @description When the next invoice is issued
                 */
                date: string;
                /** @description Two decimals */
                amount: number;
                /** @description Minor units */
                amountMinor: number;
                currency: string;
            };
        };
        ChangePlan: {
            /** @description A plan id of GET /billing/plans */
            planId: string;
        };
        Usage: {
            data: {
                /** @description YYYY-MM */
                period: string;
                /** @description Successful operations by kind; a batch counts its items */
                operations: {
                    encrypt: number;
                    decrypt: number;
                    sign: number;
                    verify: number;
                    mac: number;
                    mac_verify: number;
                    generate_data_key: number;
                    wrap: number;
                    unwrap: number;
                    re_encrypt: number;
                    certificate_issue: number;
                    certificate_revoke: number;
                    ssh_certificate_issue: number;
                    ssh_certificate_revoke: number;
                };
                totalOperations: number;
                operationsQuota: number | null;
            }[];
            /** @description Held now */
            current: {
                keys: number;
                secrets: number;
                endUsers: number;
            };
            quotas: components["schemas"]["PlanQuotas"];
        };
        Invoice: {
            id: string;
            /** @description The month billed (YYYY-MM, UTC) */
            period: string;
            planId: string;
            /** @description Two decimals */
            amount: number;
            amountMinor: number;
            currency: string;
            /** @enum {string} */
            status: "open" | "paid" | "void";
            /**
             * Format: date-time
             * @description Issued
             */
            issuedAt: string;
            paidAt: string | null;
        };
        InvoiceList: {
            data: components["schemas"]["Invoice"][];
            total: number;
        };
        PaymentWebhookAnswer: {
            /** @enum {boolean} */
            received: true;
            /** @description false: an event of another type, a redelivery, or an invoice not open */
            handled: boolean;
        };
        Referral: {
            id: string;
            tenantId: string;
            /**
             * @description active: signed up through a code; converted: its first invoice is paid; churned: left
             * @enum {string}
             */
            status: "active" | "converted" | "churned";
            /**
             * Format: date-time
             * @description Signed up
             */
            createdAt: string;
        };
        ReferralList: {
            data: components["schemas"]["Referral"][];
            total: number;
        };
        Commission: {
            referralId: string;
            /** @description Two decimals */
            amount: number;
            currency: string;
            /** @enum {string} */
            status: "calculated" | "paid";
            /** @description YYYY-MM */
            period: string;
        };
        CommissionList: {
            data: components["schemas"]["Commission"][];
            /** @description The sum of the amounts, summed exactly in minor units; two decimals */
            totalAmount: number;
        };
        CreateReferralCode: {
            /** @description What the code is for (a campaign, a page) */
            label: string;
        };
        ReferralCode: {
            code: string;
            /** @description The sign-up URL carrying the code (?ref=CODE) */
            url: string;
            /**
             * Format: date-time
             * @description Created
             */
            createdAt: string;
        };
        CreatePartnerWebhookEndpoint: {
            /** @description Where events are POSTed (http or https, no credentials): a public address, checked when saved and at every delivery */
            url: string;
        };
        PartnerWebhookEndpoint: {
            id: string;
            url: string;
            /**
             * Format: date-time
             * @description Registered
             */
            createdAt: string;
        };
        PartnerWebhookEndpointList: {
            data: components["schemas"]["PartnerWebhookEndpoint"][];
        };
        PartnerWebhookSecret: {
            /** @description Verifies X-Service-Signature: sha256=<hex HMAC-SHA256 of the raw body> */
            secret: string;
        };
        Partner: {
            id: string;
            name: string;
            email: string;
            /**
             * @description pending: signed up, waiting for an operator; active: approved (or made by an operator)
             * @enum {string}
             */
            status: "pending" | "active" | "suspended" | "rejected";
            /**
             * Format: date-time
             * @description Created
             */
            createdAt: string;
            decidedAt: string | null;
            decisionEmailStatus: ("queued" | "sent" | "failed") | null;
        };
        PartnerApiKey: {
            id: string;
            name: string;
            /** @description The key’s first characters (kmsp_ and its lookup id), to recognise it */
            prefix: string;
            /**
             * Format: date-time
             * @description Created
             */
            createdAt: string;
            /** @description partneruser:<account id>, or the operator */
            createdBy: string;
            revokedAt: string | null;
        };
        PartnerApiKeyList: {
            data: components["schemas"]["PartnerApiKey"][];
        };
        CreatePartnerApiKey: {
            /** @description What the key is for */
            name: string;
        };
        CreatedPartnerApiKey: {
            id: string;
            name: string;
            /** @description The key’s first characters (kmsp_ and its lookup id), to recognise it */
            prefix: string;
            /**
             * Format: date-time
             * @description Created
             */
            createdAt: string;
            /** @description partneruser:<account id>, or the operator */
            createdBy: string;
            revokedAt: string | null;
            /** @description The key itself: shown this once, only its hash is kept */
            key: string;
        };
        PartnerAuditEvent: {
            id: string;
            /**
             * Format: date-time
             * @description When
             */
            occurredAt: string;
            /** @description partnerkey:<id>, partneruser:<account id>, or the operator */
            actor: string;
            /** @example partner.api_key.create */
            action: string;
            resource: string;
            details: {
                [key: string]: unknown;
            };
        };
        PartnerAuditList: {
            data: components["schemas"]["PartnerAuditEvent"][];
            total: number;
        };
        TenantSignup: {
            /** @description The new tenant’s name */
            organizationName: string;
            /** @description An e-mail address: the link goes there */
            email: string;
            /** @description A partner’s referral code (the sign-up URL’s ?ref=): the tenant is attributed to that partner */
            referralCode?: string;
        };
        SignupRequested: {
            /** @description Where the confirmation link was sent */
            email: string;
            /**
             * Format: date-time
             * @description The link works once, until then
             */
            expiresAt: string;
        };
        PartnerSignup: {
            /** @description The partner’s company name */
            organizationName: string;
            /** @description An e-mail address: the link goes there */
            email: string;
        };
    };
    responses: never;
    parameters: never;
    requestBodies: never;
    headers: never;
    pathItems: never;
}
export type $defs = Record<string, never>;
export interface operations {
    getHealth: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Health"];
                };
            };
            /** @description The database is down, or the signing key does not open (Retry-After says when to ask again) */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Health"];
                };
            };
        };
    };
    getCurrentTenant: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CurrentTenant"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    listApiKeys: {
        parameters: {
            query: {
                /** @description Items per page */
                limit: number;
                /** @description Items to skip */
                offset: number;
                /** @description Also list revoked keys */
                includeRevoked: boolean;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["ApiKeyView"][];
                        total: number;
                    };
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    createApiKey: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** @description A key created by a restricted API key must name `keys` and `operations` within its own (403 `restriction_escalation`) */
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "name": "ci-payments",
                 *       "scopes": [
                 *         "keys:read",
                 *         "encryption:write"
                 *       ],
                 *       "keys": [
                 *         "alias/payments-prod"
                 *       ],
                 *       "operations": [
                 *         "encrypt",
                 *         "generate_data_key"
                 *       ],
                 *       "expiresAt": "2030-06-30T00:00:00Z"
                 *     }
                 */
                "application/json": components["schemas"]["CreateApiKeyRequest"];
            };
        };
        responses: {
            /** @description Default Response */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        /**
                         * Format: uuid
                         * @description API key id
                         */
                        id: string;
                        name: string;
                        scopes: string[];
                        /** @description First characters of the key, to recognise it */
                        prefix: string;
                        /**
                         * Format: date-time
                         * @description Creation time
                         */
                        createdAt: string;
                        /** @description Actor that created the key */
                        createdBy: string;
                        /** @description null for keys made by the CLI or at tenant creation */
                        parentId: string | null;
                        expiresAt: string | null;
                        revokedAt: string | null;
                        /** @description Key ids and aliases the key may use, fixed at creation; null: every key of the tenant */
                        keys: string[] | null;
                        /** @description Cryptographic operations the key may perform, fixed at creation; null: all its scopes allow */
                        operations: ("encrypt" | "decrypt" | "re_encrypt" | "generate_data_key" | "wrap" | "unwrap" | "sign" | "verify" | "mac" | "mac_verify")[] | null;
                        /** @description When the key last made a request the audit log records (every cryptographic operation and change, and refusals; not reads); null: never */
                        lastUsedAt: string | null;
                        /** @description Shown once */
                        key: string;
                    };
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    getApiKey: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ApiKeyView"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    revokeApiKey: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        /**
                         * Format: uuid
                         * @description API key id
                         */
                        id: string;
                        name: string;
                        scopes: string[];
                        /** @description First characters of the key, to recognise it */
                        prefix: string;
                        /**
                         * Format: date-time
                         * @description Creation time
                         */
                        createdAt: string;
                        /** @description Actor that created the key */
                        createdBy: string;
                        /** @description null for keys made by the CLI or at tenant creation */
                        parentId: string | null;
                        expiresAt: string | null;
                        revokedAt: string | null;
                        /** @description Key ids and aliases the key may use, fixed at creation; null: every key of the tenant */
                        keys: string[] | null;
                        /** @description Cryptographic operations the key may perform, fixed at creation; null: all its scopes allow */
                        operations: ("encrypt" | "decrypt" | "re_encrypt" | "generate_data_key" | "wrap" | "unwrap" | "sign" | "verify" | "mac" | "mac_verify")[] | null;
                        /** @description When the key last made a request the audit log records (every cryptographic operation and change, and refusals; not reads); null: never */
                        lastUsedAt: string | null;
                        /** @description Keys this key created, directly or through others, revoked with it */
                        revokedDescendants: string[];
                    };
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    listAuditRecords: {
        parameters: {
            query: {
                /** @description Exact action, e.g. apikeys.revoke */
                action?: string;
                /** @description Exact resource, e.g. apikey:<id> */
                resource?: string;
                outcome?: "success" | "failure" | "denied";
                /** @description Records at or after this time */
                from?: string;
                /** @description Records before this time */
                to?: string;
                limit: number;
                /** @description nextCursor of the previous page */
                cursor?: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["AuditRecord"][];
                        nextCursor: string | null;
                    };
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    listKeys: {
        parameters: {
            query: {
                /** @description Only keys in these states (repeat to select several) */
                status?: ("Active" | "Expired" | "Revoked" | "Pending Deletion" | "Destroyed")[];
                /** @description Only keys of these types (repeat to select several) */
                keyType?: ("Encryption" | "Signing" | "HMAC")[];
                /** @description Only keys of these algorithms (repeat to select several) */
                algorithm?: ("ML-KEM-512" | "ML-KEM-768" | "ML-KEM-1024" | "ML-DSA-44" | "ML-DSA-65" | "ML-DSA-87" | "SLH-DSA-128s" | "RSA-2048" | "RSA-3072" | "RSA-4096" | "EC-P256" | "EC-P384" | "EC-P521" | "Ed25519" | "HMAC-SHA256" | "HMAC-SHA384" | "HMAC-SHA512" | "AES-128-GCM" | "AES-192-GCM" | "AES-256-GCM" | "X-Wing")[];
                /** @description Keys carrying any of these labels (repeat to select several) */
                label?: string[];
                /** @description Case-insensitive text in name or description */
                search?: string;
                /** @description Only favourites (true) or only the others */
                favorite?: boolean;
                /** @description Sort column (favourites always first) */
                sort: "name" | "algorithm" | "purpose" | "version" | "status" | "createdAt";
                order: "asc" | "desc";
                limit: number;
                /** @description nextCursor of the previous page */
                cursor?: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["KeyList"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    createKey: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "name": "orders-encryption",
                 *       "keyType": "Encryption",
                 *       "algorithm": "ML-KEM-768",
                 *       "labels": [
                 *         "orders",
                 *         "prod"
                 *       ]
                 *     }
                 */
                "application/json": components["schemas"]["CreateKeyRequest"];
            };
        };
        responses: {
            /** @description Default Response */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["KeyView"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    importKey: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "name": "partner-signing",
                 *       "keyType": "Signing",
                 *       "algorithm": "Ed25519",
                 *       "format": "JWK",
                 *       "keyMaterial": {
                 *         "kty": "OKP",
                 *         "crv": "Ed25519",
                 *         "d": "QTXT_xhCAP6KKu6oLNNfbrrugTlMqWSlAEJc-RNXFSw",
                 *         "x": "P-0K8OTBl-n8-uaLEwLseeKA5VaL6NpjFGt4HcmtWAc"
                 *       }
                 *     }
                 */
                "application/json": components["schemas"]["ImportKeyRequest"];
            };
        };
        responses: {
            /** @description Default Response */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["KeyView"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    getKey: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The key: the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
                keyId: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["KeyView"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    scheduleKeyDeletion: {
        parameters: {
            query: {
                /** @description Days before the material is destroyed; cancel-deletion works until then */
                pendingWindowDays: number;
            };
            header?: never;
            path: {
                /** @description The key: the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
                keyId: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["KeyView"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    updateKey: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The key: the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
                keyId: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "description": "Encrypts order exports",
                 *       "labels": [
                 *         "orders"
                 *       ],
                 *       "isFavorite": true
                 *     }
                 */
                "application/json": components["schemas"]["UpdateKeyRequest"];
            };
        };
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["KeyView"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    rotateKey: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The key: the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
                keyId: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["KeyView"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    revokeKey: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The key: the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
                keyId: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["KeyView"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    cancelKeyDeletion: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The key: the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
                keyId: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["KeyView"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    listKeyVersions: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The key: the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
                keyId: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["KeyVersionList"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    getPublicKey: {
        parameters: {
            query: {
                /** @description Encoding (spec 2.2) */
                format: "PEM" | "DER" | "RAW" | "JWK";
                /** @description Comma-separated extra fields: name, description, keyType, isPostQuantum, isActive, isDefault, isFavorite, createdAt, expiresAt, lastRotatedAt, labels, state, scheduledDeletionDate; metadata or all for every one */
                include?: string;
                /** @description Key version (default: current) */
                version?: number;
            };
            header?: never;
            path: {
                /** @description The key: the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
                keyId: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PublicKeyView"] | components["schemas"]["PublicJwk"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    downloadPublicKey: {
        parameters: {
            query: {
                /** @description Encoding (spec 2.2) */
                format: "PEM" | "DER" | "RAW" | "JWK";
                /** @description Key version (default: current) */
                version?: number;
            };
            header?: never;
            path: {
                /** @description The key: the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
                keyId: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The key file */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": string;
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    exportPrivateKey: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The key: the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
                keyId: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "confirm": "partner-signing",
                 *       "format": "PEM",
                 *       "password": "correct-horse-battery-staple"
                 *     }
                 */
                "application/json": components["schemas"]["ExportPrivateKeyRequest"];
            };
        };
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PrivateKeyExport"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    listKeyAliases: {
        parameters: {
            query: {
                /** @description Only the aliases of this key: the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
                keyId?: string;
                /** @description Aliases per page */
                limit: number;
                /** @description nextCursor of the previous page */
                cursor?: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["KeyAliasList"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    createKeyAlias: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "alias": "alias/payments-prod",
                 *       "keyId": "3f0c9a8e-5b1d-4c2a-9e7f-1a2b3c4d5e6f"
                 *     }
                 */
                "application/json": components["schemas"]["CreateKeyAliasRequest"];
            };
        };
        responses: {
            /** @description Default Response */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["KeyAlias"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    getKeyAlias: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The alias, URL-encoded: alias%2F<name>. Case-sensitive, unique in the tenant; alias/kms/ is reserved */
                alias: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["KeyAlias"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    deleteKeyAlias: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The alias, URL-encoded: alias%2F<name>. Case-sensitive, unique in the tenant; alias/kms/ is reserved */
                alias: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    moveKeyAlias: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The alias, URL-encoded: alias%2F<name>. Case-sensitive, unique in the tenant; alias/kms/ is reserved */
                alias: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "keyId": "7d1e2f3a-4b5c-4d6e-8f70-8192a3b4c5d6"
                 *     }
                 */
                "application/json": components["schemas"]["MoveKeyAliasRequest"];
            };
        };
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["KeyAlias"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    getRotationPolicy: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The key: the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
                keyId: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RotationPolicyView"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    setRotationPolicy: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The key: the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
                keyId: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "frequency": "Quarterly"
                 *     }
                 */
                "application/json": components["schemas"]["RotationPolicyRequest"];
            };
        };
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RotationPolicyView"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    deleteRotationPolicy: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The key: the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
                keyId: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Removed */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    pauseRotationPolicy: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The key: the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
                keyId: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RotationPolicyView"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    resumeRotationPolicy: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The key: the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
                keyId: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RotationPolicyView"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    listCas: {
        parameters: {
            query: {
                /** @description Items per page */
                limit: number;
                /** @description Items to skip */
                offset: number;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CertificateAuthorityList"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    createCa: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "name": "root-2026",
                 *       "type": "root",
                 *       "algorithm": "ML-DSA-65",
                 *       "subject": {
                 *         "commonName": "Example Root CA",
                 *         "organization": "Example"
                 *       },
                 *       "pathLength": 1
                 *     }
                 */
                "application/json": components["schemas"]["CreateCertificateAuthority"];
            };
        };
        responses: {
            /** @description Default Response */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CertificateAuthority"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    getCa: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CertificateAuthority"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    updateCa: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "crlDistributionPoints": [
                 *         "https://pki.example.com/crl/root-2026.crl"
                 *       ]
                 *     }
                 */
                "application/json": components["schemas"]["UpdateCertificateAuthority"];
            };
        };
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CertificateAuthority"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    getCaCertificate: {
        parameters: {
            query?: {
                format?: "der" | "pem";
            };
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description application/pkix-cert, or PEM */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": string;
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    importCaCertificate: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "certificate": "-----BEGIN CERTIFICATE-----\nMIIB...\n-----END CERTIFICATE-----\n"
                 *     }
                 */
                "application/json": components["schemas"]["ImportCaCertificate"];
            };
        };
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CertificateAuthority"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    getCaCrl: {
        parameters: {
            query?: {
                format?: "der" | "pem";
            };
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description application/pkix-crl, or PEM */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": string;
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    postCaOcsp: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description application/ocsp-response: a DER OCSPResponse */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": string;
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Body too large (payload_too_large) */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "payload_too_large",
                     *       "message": "The request body exceeds the limit of 1048576 bytes",
                     *       "limitBytes": 1048576
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Content-Type is not one the route takes (unsupported_media_type) */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unsupported_media_type",
                     *       "message": "Content-Type must be application/json (/encrypt and /decrypt also take application/octet-stream)"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    getCaOcsp: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The CA id */
                id: string;
                /** @description The DER OCSPRequest in Base64 (or Base64url), URL-encoded (RFC 6960 Appendix A.1) */
                request: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description application/ocsp-response: a DER OCSPResponse */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": string;
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    listCaRoles: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CertificateRoleList"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    createCaRole: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "name": "web",
                 *       "allowedDomains": [
                 *         "example.com"
                 *       ],
                 *       "allowSubdomains": true,
                 *       "maxTtlSeconds": 7776000
                 *     }
                 */
                "application/json": components["schemas"]["CreateCertificateRole"];
            };
        };
        responses: {
            /** @description Default Response */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CertificateRole"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    getCaRole: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description CA id */
                id: string;
                /** @description Letters, digits, . _ - */
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CertificateRole"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    deleteCaRole: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description CA id */
                id: string;
                /** @description Letters, digits, . _ - */
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    updateCaRole: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description CA id */
                id: string;
                /** @description Letters, digits, . _ - */
                name: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "allowWildcardCertificates": true
                 *     }
                 */
                "application/json": components["schemas"]["UpdateCertificateRole"];
            };
        };
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CertificateRole"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    listCertificates: {
        parameters: {
            query: {
                /** @description Issued by this CA */
                caId?: string;
                status?: "valid" | "revoked" | "expired";
                /** @description Valid and ending within this many days */
                expiringWithinDays?: number;
                /** @description Items per page */
                limit: number;
                /** @description Items to skip */
                offset: number;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CertificateList"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    issueCertificate: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "caId": "7d0c8d1e-9f57-4c4e-9f6a-2f3c1f0c8b11",
                 *       "role": "web",
                 *       "dnsNames": [
                 *         "api.example.com"
                 *       ]
                 *     }
                 */
                "application/json": components["schemas"]["IssueCertificate"];
            };
        };
        responses: {
            /** @description Default Response */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["IssuedCertificate"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Too many requests (rate_limited); Retry-After says when to try again */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "crypto_busy",
                     *       "message": "Too many cryptographic operations of this tenant are waiting (64); retry shortly",
                     *       "retryAfterSeconds": 1
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description A dependency needed to perform and audit the operation is unavailable */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "audit_unavailable",
                     *       "message": "The audit log cannot be written; the operation was not performed"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    getCertificate: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Hex, with or without colons */
                serial: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Certificate"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    revokeCertificate: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Hex, with or without colons */
                serial: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "reason": "keyCompromise"
                 *     }
                 */
                "application/json": components["schemas"]["RevokeCertificate"];
            };
        };
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CertificateRevocation"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Too many requests (rate_limited); Retry-After says when to try again */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "crypto_busy",
                     *       "message": "Too many cryptographic operations of this tenant are waiting (64); retry shortly",
                     *       "retryAfterSeconds": 1
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description A dependency needed to perform and audit the operation is unavailable */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "audit_unavailable",
                     *       "message": "The audit log cannot be written; the operation was not performed"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    listSshCas: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SshCaList"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    createSshCa: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "type": "user",
                 *       "algorithm": "Ed25519"
                 *     }
                 */
                "application/json": components["schemas"]["CreateSshCaRequest"];
            };
        };
        responses: {
            /** @description Default Response */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SshCaView"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    getSshCa: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SshCaView"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    updateSshCa: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "defaultValiditySeconds": 28800,
                 *       "maxValiditySeconds": 43200
                 *     }
                 */
                "application/json": components["schemas"]["UpdateSshCaRequest"];
            };
        };
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SshCaView"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    getSshCaPublicKey: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description text/plain: `<type> <base64> <comment>` and a newline */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": string;
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    getSshCaKrl: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description application/octet-stream: an OpenSSH KRL (PROTOCOL.krl) */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": string;
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    listSshCertificates: {
        parameters: {
            query: {
                /** @description user: certificates for logging in to hosts; host: certificates hosts present to clients */
                caType?: "user" | "host";
                /** @description Only revoked (true) or only unrevoked (false) certificates */
                revoked?: boolean;
                /** @description Only certificates valid now, not revoked, whose validity ends within this many hours */
                expiringWithinHours?: number;
                /** @description Items per page */
                limit: number;
                /** @description Items to skip */
                offset: number;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SshCertificateList"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    signSshCertificate: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "caId": "8a7c3f52-1f0e-4a57-9b4e-2f1d6c9e0b31",
                 *       "publicKey": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPv0qvg/4Y5FP+RupvaGoibT0Ygx+B1iD/hO8eYwpGiu alice@laptop",
                 *       "principals": [
                 *         "alice"
                 *       ],
                 *       "validitySeconds": 28800,
                 *       "extensions": [
                 *         "permit-pty",
                 *         "permit-agent-forwarding"
                 *       ]
                 *     }
                 */
                "application/json": components["schemas"]["SignSshCertificateRequest"];
            };
        };
        responses: {
            /** @description Default Response */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SshCertificateView"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    getSshCertificate: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SshCertificateView"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    revokeSshCertificate: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "reason": "laptop lost"
                 *     }
                 */
                "application/json": components["schemas"]["RevokeSshCertificateRequest"];
            };
        };
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SshCertificateView"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    listCloudConnections: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CloudConnectionList"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    createCloudConnection: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "name": "production AWS",
                 *       "provider": "aws",
                 *       "settings": {
                 *         "region": "eu-west-1"
                 *       },
                 *       "credentials": {
                 *         "accessKeyId": "AKIAEXAMPLEEXAMPLE12",
                 *         "secretAccessKey": "example-secret-access-key-000000000000000"
                 *       }
                 *     }
                 */
                "application/json": components["schemas"]["CreateCloudConnection"];
            };
        };
        responses: {
            /** @description Default Response */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CloudConnection"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    getCloudConnection: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CloudConnection"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    deleteCloudConnection: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    rotateCloudCredentials: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "credentials": {
                 *         "accessKeyId": "AKIAEXAMPLEEXAMPLE34",
                 *         "secretAccessKey": "example-rotated-secret-access-key-0000000"
                 *       }
                 *     }
                 */
                "application/json": components["schemas"]["RotateCloudCredentials"];
            };
        };
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CloudConnection"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    testCloudConnection: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CloudConnectionTest"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    listCloudExports: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The key: the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
                keyId: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CloudExportList"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    createCloudExport: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The key: the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
                keyId: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "connectionId": "0b6f3c1e-2f4a-4c69-9d1e-6f0d2a9b7c11",
                 *       "target": {
                 *         "alias": "alias/payments-signing"
                 *       }
                 *     }
                 */
                "application/json": components["schemas"]["CreateCloudExport"];
            };
        };
        responses: {
            /** @description Default Response */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CloudExport"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    getCloudExport: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The key: the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
                keyId: string;
                /** @description The cloud export */
                exportId: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CloudExport"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    deleteCloudExport: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The key: the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
                keyId: string;
                /** @description The cloud export */
                exportId: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    syncCloudExport: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The key: the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
                keyId: string;
                /** @description The cloud export */
                exportId: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CloudExport"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    getInsights: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Insights"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    getKeyInsights: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The key: the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
                keyId: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Insights"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    suggestKeyTags: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The key: the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
                keyId: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CreatedTagSuggestions"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    listTagSuggestions: {
        parameters: {
            query: {
                status?: "pending" | "accepted" | "rejected";
                /** @description Only this key */
                keyId?: string;
                /** @description Items per page */
                limit: number;
                /** @description Items to skip */
                offset: number;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["TagSuggestionList"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    acceptTagSuggestion: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["TagSuggestion"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    acceptAllTagSuggestions: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /** @example {} */
                "application/json": components["schemas"]["DecideAllTagSuggestions"];
            };
        };
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["DecidedTagSuggestions"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    rejectTagSuggestion: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["TagSuggestion"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    rejectAllTagSuggestions: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /** @example {} */
                "application/json": components["schemas"]["DecideAllTagSuggestions"];
            };
        };
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["DecidedTagSuggestions"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    startTagSuggestionJob: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["TagSuggestionJob"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    getTagSuggestionJob: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["TagSuggestionJob"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    listWebhookDeliveries: {
        parameters: {
            query: {
                /** @description Items per page */
                limit: number;
                /** @description Items to skip */
                offset: number;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["WebhookDelivery"][];
                    };
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    getWebhookDelivery: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["WebhookDelivery"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    getWebhookSecret: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["WebhookSecret"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    rotateWebhookSecret: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["WebhookSecret"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    encrypt: {
        parameters: {
            query?: never;
            header?: {
                /** @description Binary bodies only: the Encryption key (default: the tenant default Encryption key): the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
                "x-key-id"?: string;
                /** @description Binary bodies only: the context (additional authenticated data) as standard Base64 of its UTF-8 bytes (a map context: of its canonical JSON, docs/crypto-operations.md "Encryption context") */
                "x-encryption-context"?: string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "plaintext": "SGVsbG8sIHdvcmxkIQ==",
                 *       "context": "order=1042"
                 *     }
                 */
                "application/json": components["schemas"]["EncryptRequest"];
                "application/octet-stream": string;
            };
        };
        responses: {
            /** @description JSON for a JSON request; raw bytes, with X-Key-Id and X-Key-Version, for a binary one */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EncryptResponse"];
                    "application/octet-stream": string;
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Body too large (payload_too_large) */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "payload_too_large",
                     *       "message": "The request body exceeds the limit of 1048576 bytes",
                     *       "limitBytes": 1048576
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Content-Type is not one the route takes (unsupported_media_type) */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unsupported_media_type",
                     *       "message": "Content-Type must be application/json (/encrypt and /decrypt also take application/octet-stream)"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    decrypt: {
        parameters: {
            query?: never;
            header?: {
                /** @description Binary bodies only: cross-check of the key the envelope names: the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
                "x-key-id"?: string;
                /** @description Binary bodies only: cross-check of the envelope key version (a decimal integer) */
                "x-key-version"?: string;
                /** @description Binary bodies only: the context (additional authenticated data) as standard Base64 of its UTF-8 bytes (a map context: of its canonical JSON, docs/crypto-operations.md "Encryption context") */
                "x-encryption-context"?: string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "ciphertext": "zGpaiBsXHk2wXnvXZ2dsQYnAzA==",
                 *       "encapsulatedKey": "19pfFL9heZ3BOpFeZ/lUJceJHOtSVmhLD31C8lrpEkys+WfH1L2ayYm+SZM0eHIyxusoxAvsKwKOqO7s9S2Lgx6TR+DqC4hWNCr0WpxJDHFkPtlrgFkygUOWXEl2LKIZlYDjFT2QA9cd5sVuPKmMwasx1p8b87hL",
                 *       "nonce": "PpIRzfRMZHEkdhJe",
                 *       "tag": "zCsEOOdfx+U8CiOosO0elQ==",
                 *       "context": "order=1042"
                 *     }
                 */
                "application/json": components["schemas"]["DecryptRequest"];
                "application/octet-stream": string;
            };
        };
        responses: {
            /** @description JSON for a JSON request; raw bytes, with X-Key-Id and X-Key-Version, for a binary one */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["DecryptResponse"];
                    "application/octet-stream": string;
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Body too large (payload_too_large) */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "payload_too_large",
                     *       "message": "The request body exceeds the limit of 1048576 bytes",
                     *       "limitBytes": 1048576
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Content-Type is not one the route takes (unsupported_media_type) */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unsupported_media_type",
                     *       "message": "Content-Type must be application/json (/encrypt and /decrypt also take application/octet-stream)"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    encryptBatch: {
        parameters: {
            query?: never;
            header?: {
                /** @description Binary encrypt batches only: the Encryption key of every item (default: the tenant default): the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
                "x-key-id"?: string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "items": [
                 *         {
                 *           "plaintext": "SGVsbG8sIHdvcmxkIQ==",
                 *           "context": "order=1042"
                 *         },
                 *         {
                 *           "plaintext": "d29ybGQ="
                 *         }
                 *       ]
                 *     }
                 */
                "application/json": components["schemas"]["EncryptBatchRequest"];
                "application/octet-stream": string;
            };
        };
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EncryptBatchResponse"];
                    "application/octet-stream": string;
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Body too large (payload_too_large) */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "payload_too_large",
                     *       "message": "The request body exceeds the limit of 1048576 bytes",
                     *       "limitBytes": 1048576
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Content-Type is not one the route takes (unsupported_media_type) */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unsupported_media_type",
                     *       "message": "Content-Type must be application/json (/encrypt and /decrypt also take application/octet-stream)"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    decryptBatch: {
        parameters: {
            query?: never;
            header?: {
                /** @description Binary encrypt batches only: the Encryption key of every item (default: the tenant default): the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
                "x-key-id"?: string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "items": [
                 *         {
                 *           "ciphertext": "zGpaiBsXHk2wXnvXZ2dsQYnAzA==",
                 *           "encapsulatedKey": "19pfFL9heZ3BOpFeZ/lUJceJHOtSVmhLD31C8lrpEkys+WfH1L2ayYm+SZM0eHIyxusoxAvsKwKOqO7s9S2Lgx6TR+DqC4hWNCr0WpxJDHFkPtlrgFkygUOWXEl2LKIZlYDjFT2QA9cd5sVuPKmMwasx1p8b87hL",
                 *           "nonce": "PpIRzfRMZHEkdhJe",
                 *           "tag": "zCsEOOdfx+U8CiOosO0elQ==",
                 *           "context": "order=1042"
                 *         }
                 *       ]
                 *     }
                 */
                "application/json": components["schemas"]["DecryptBatchRequest"];
                "application/octet-stream": string;
            };
        };
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["DecryptBatchResponse"];
                    "application/octet-stream": string;
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Body too large (payload_too_large) */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "payload_too_large",
                     *       "message": "The request body exceeds the limit of 1048576 bytes",
                     *       "limitBytes": 1048576
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Content-Type is not one the route takes (unsupported_media_type) */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unsupported_media_type",
                     *       "message": "Content-Type must be application/json (/encrypt and /decrypt also take application/octet-stream)"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    sign: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "message": "SGVsbG8sIHdvcmxkIQ==",
                 *       "signatureEncoding": "versioned"
                 *     }
                 */
                "application/json": components["schemas"]["SignRequest"];
            };
        };
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SignResponse"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description A dependency needed to perform and audit the operation is unavailable */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "audit_unavailable",
                     *       "message": "The audit log cannot be written; the operation was not performed"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    verify: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "keyId": "3f0c9a8e-5b1d-4c2a-9e7f-1a2b3c4d5e6f",
                 *       "message": "SGVsbG8sIHdvcmxkIQ==",
                 *       "signature": "kms:v1:yk/ZjmEuzq5u4SEMlzriVPsJAPK+la7mhyPabJcdfuZPoGRqb1JHpV7XUy4XEqChoh+Rhzyt2Tz+dM8MVqLTIg=="
                 *     }
                 */
                "application/json": components["schemas"]["VerifyRequest"];
            };
        };
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["VerifyResponse"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description A dependency needed to perform and audit the operation is unavailable */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "audit_unavailable",
                     *       "message": "The audit log cannot be written; the operation was not performed"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    generateMac: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The key: the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
                keyId: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "data": "SGVsbG8sIHdvcmxkIQ=="
                 *     }
                 */
                "application/json": components["schemas"]["MacRequest"];
            };
        };
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["MacResponse"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    verifyMac: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The key: the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
                keyId: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "data": "SGVsbG8sIHdvcmxkIQ==",
                 *       "mac": "RBSNsqbVjEGUYY16TMtnXh+0GSQlQpGhtnOIDeEh/4M=",
                 *       "keyVersion": 1
                 *     }
                 */
                "application/json": components["schemas"]["MacVerifyRequest"];
            };
        };
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["VerifyResponse"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    generateDataKey: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /** @example {} */
                "application/json": components["schemas"]["GenerateDataKeyRequest"];
            };
        };
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["DataKeyResponse"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    generateKeyDataKey: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The key: the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
                keyId: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "keyBytes": 32,
                 *       "withPlaintext": true,
                 *       "context": "bucket=invoices"
                 *     }
                 */
                "application/json": components["schemas"]["DataKeyRequest"];
            };
        };
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["DataKeyResponse"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    wrapKey: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The key: the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
                keyId: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "plaintext": "RBSNsqbVjEGUYY16TMtnXh+0GSQlQpGhtnOIDeEh/4M=",
                 *       "context": "bucket=invoices"
                 *     }
                 */
                "application/json": components["schemas"]["WrapRequest"];
            };
        };
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["WrapResponse"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    unwrapKey: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The key: the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
                keyId: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "wrappedKey": "19pfFL9heZ3BOpFeZ/lUJceJHOtSVmhLD31C8lrpEkys+WfH1L2ayYm+SZM0eHIyxusoxAvsKwKOqO7s9S2Lgx6TR+DqC4hWNCr0WpxJDHFkPtlrgFkygUOWXEl2LKIZlYDjFT2QA9cd5sVuPKmMwasx1p8b87hL",
                 *       "context": "bucket=invoices"
                 *     }
                 */
                "application/json": components["schemas"]["UnwrapRequest"];
            };
        };
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UnwrapResponse"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    reEncrypt: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "ciphertext": "zGpaiBsXHk2wXnvXZ2dsQYnAzA==",
                 *       "encapsulatedKey": "19pfFL9heZ3BOpFeZ/lUJceJHOtSVmhLD31C8lrpEkys+WfH1L2ayYm+SZM0eHIyxusoxAvsKwKOqO7s9S2Lgx6TR+DqC4hWNCr0WpxJDHFkPtlrgFkygUOWXEl2LKIZlYDjFT2QA9cd5sVuPKmMwasx1p8b87hL",
                 *       "nonce": "PpIRzfRMZHEkdhJe",
                 *       "tag": "zCsEOOdfx+U8CiOosO0elQ==",
                 *       "context": "order=1042",
                 *       "destinationKeyId": "alias/payments-2026",
                 *       "destinationContext": {
                 *         "order": "1042",
                 *         "tenant": "acme"
                 *       }
                 *     }
                 */
                "application/json": components["schemas"]["ReEncryptRequest"];
            };
        };
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ReEncryptResponse"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Body too large (payload_too_large) */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "payload_too_large",
                     *       "message": "The request body exceeds the limit of 1048576 bytes",
                     *       "limitBytes": 1048576
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    reEncryptBatch: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "items": [
                 *         {
                 *           "ciphertext": "zGpaiBsXHk2wXnvXZ2dsQYnAzA==",
                 *           "encapsulatedKey": "19pfFL9heZ3BOpFeZ/lUJceJHOtSVmhLD31C8lrpEkys+WfH1L2ayYm+SZM0eHIyxusoxAvsKwKOqO7s9S2Lgx6TR+DqC4hWNCr0WpxJDHFkPtlrgFkygUOWXEl2LKIZlYDjFT2QA9cd5sVuPKmMwasx1p8b87hL",
                 *           "nonce": "PpIRzfRMZHEkdhJe",
                 *           "tag": "zCsEOOdfx+U8CiOosO0elQ==",
                 *           "context": "order=1042"
                 *         }
                 *       ],
                 *       "destinationKeyId": "0b6f3c1e-4a4f-4b8e-9a51-2f0c1d7e9a10"
                 *     }
                 */
                "application/json": components["schemas"]["ReEncryptBatchRequest"];
            };
        };
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ReEncryptBatchResponse"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Body too large (payload_too_large) */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "payload_too_large",
                     *       "message": "The request body exceeds the limit of 1048576 bytes",
                     *       "limitBytes": 1048576
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    rawEncrypt: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The key: the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
                keyId: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "plaintext": "SGVsbG8sIHdvcmxkIQ==",
                 *       "aad": "b3JkZXI9MTA0Mg=="
                 *     }
                 */
                "application/json": components["schemas"]["RawEncryptRequest"];
            };
        };
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RawEncryptResponse"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    rawDecrypt: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The key: the key id, or an alias (alias/<name>; in a path, URL-encoded: alias%2F<name>) */
                keyId: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "ciphertext": "W2nHoYQHMdCSPZ5bvg==",
                 *       "iv": "N5eRqKZpkNhw1NCY",
                 *       "tag": "WnQ1CCTxpDMQ5+3hc3o7jw==",
                 *       "aad": "b3JkZXI9MTA0Mg==",
                 *       "keyVersion": 1
                 *     }
                 */
                "application/json": components["schemas"]["RawDecryptRequest"];
            };
        };
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RawDecryptResponse"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    listSecrets: {
        parameters: {
            query: {
                /** @description Comma-separated fields: customFields, notes, labels, description, expiresAt, folderId, isActive, isFavorite, hasTotp, isTravelSafe, createdAt, updatedAt, createdBy, updatedBy; metadata for every metadata field; all for everything including the value */
                include?: string;
                /** @description A folder id, or root for secrets in no folder */
                folderId?: string | "root";
                /** @description Secrets carrying any of these labels (repeat) */
                label?: string[];
                favorite?: boolean;
                active?: boolean;
                /** @description Case-insensitive text in name or description */
                search?: string;
                /** @description true: the deleted secrets that can still be restored */
                deleted: boolean;
                limit: number;
                offset: number;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SecretList"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    createSecret: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "name": "orders-db-password",
                 *       "value": "correct-horse-battery-staple",
                 *       "description": "PostgreSQL password of the orders service",
                 *       "labels": [
                 *         "prod"
                 *       ]
                 *     }
                 */
                "application/json": components["schemas"]["CreateSecretRequest"];
            };
        };
        responses: {
            /** @description id, name and version always; the rest as include selects */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SecretView"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    moveSecrets: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "secretIds": [
                 *         "3f0c9a8e-5b1d-4c2a-9e7f-1a2b3c4d5e6f"
                 *       ],
                 *       "folderId": null
                 *     }
                 */
                "application/json": components["schemas"]["MoveSecretsRequest"];
            };
        };
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        moved: number;
                    };
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    getSecret: {
        parameters: {
            query?: {
                /** @description Comma-separated fields: customFields, notes, labels, description, expiresAt, folderId, isActive, isFavorite, hasTotp, isTravelSafe, createdAt, updatedAt, createdBy, updatedBy; metadata for every metadata field; all for everything including the value */
                include?: string;
            };
            header?: never;
            path: {
                /** @description Secret id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description id, name and version always; the rest as include selects */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SecretView"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    deleteSecret: {
        parameters: {
            query: {
                /** @description true: purge now, with every version */
                permanent: boolean;
            };
            header?: never;
            path: {
                /** @description Secret id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description id, name and version always; the rest as include selects */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SecretView"];
                };
            };
            /** @description Purged */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    updateSecret: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Secret id */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "value": "staple-battery-horse-correct",
                 *       "notes": "Rotated after the 2026 audit"
                 *     }
                 */
                "application/json": components["schemas"]["UpdateSecretRequest"];
            };
        };
        responses: {
            /** @description id, name and version always; the rest as include selects */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SecretView"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    restoreSecret: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Secret id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description id, name and version always; the rest as include selects */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SecretView"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    listSecretVersions: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Secret id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SecretVersionList"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    getSecretVersion: {
        parameters: {
            query?: {
                /** @description all: include the value */
                include?: string;
            };
            header?: never;
            path: {
                /** @description Secret id */
                id: string;
                version: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SecretVersion"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    getSecretTotp: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Secret id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["TotpCode"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    listFolders: {
        parameters: {
            query: {
                parentId?: string | "root";
                limit: number;
                offset: number;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["FolderList"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    createFolder: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "name": "production",
                 *       "parentId": null
                 *     }
                 */
                "application/json": components["schemas"]["CreateFolderRequest"];
            };
        };
        responses: {
            /** @description Default Response */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["FolderView"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    getFolder: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["FolderView"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    deleteFolder: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    updateFolder: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "name": "prod"
                 *     }
                 */
                "application/json": components["schemas"]["UpdateFolderRequest"];
            };
        };
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["FolderView"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    getMe: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Me"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    listTeamMembers: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["TeamMemberList"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    removeTeamMember: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The member’s account */
                accountId: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Removed */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    changeTeamMemberRole: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The member’s account */
                accountId: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "role": "tenant:developer"
                 *     }
                 */
                "application/json": components["schemas"]["ChangeMemberRole"];
            };
        };
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["TeamMember"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    listInvitations: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["InvitationList"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    createInvitation: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "email": "grace@example.com",
                 *       "role": "tenant:developer"
                 *     }
                 */
                "application/json": components["schemas"]["CreateInvitation"];
            };
        };
        responses: {
            /** @description Default Response */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Invitation"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    resendInvitation: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Invitation"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    revokeInvitation: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Invitation"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    getSecuritySettings: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SecuritySettings"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    updateSecuritySettings: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** @description Only what is given changes: groups and fields left out keep their values */
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "mfaMethods": {
                 *         "totp": {
                 *           "enabled": true,
                 *           "required": true
                 *         }
                 *       },
                 *       "sessionLifetimes": {
                 *         "accessTokenSeconds": 600
                 *       }
                 *     }
                 */
                "application/json": components["schemas"]["SecuritySettingsPatch"];
            };
        };
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SecuritySettings"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    getBranding: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["LoginPanel"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    updateBranding: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "imageUrl": "https://cdn.example.com/panel.png",
                 *       "translations": {
                 *         "en": {
                 *           "title": "Welcome to Orders",
                 *           "text": "Sign in to see your orders."
                 *         },
                 *         "de": {
                 *           "title": "Willkommen bei Orders",
                 *           "text": "Melden Sie sich an, um Ihre Bestellungen zu sehen."
                 *         }
                 *       }
                 *     }
                 */
                "application/json": components["schemas"]["UpdateLoginPanel"];
            };
        };
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["LoginPanel"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    listApplications: {
        parameters: {
            query: {
                /** @description Items per page */
                limit: number;
                /** @description Items to skip */
                offset: number;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ApplicationList"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    createApplication: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "name": "Dashboard",
                 *       "applicationType": "spa",
                 *       "redirectUris": [
                 *         "https://app.example.com/callback"
                 *       ],
                 *       "resources": [
                 *         "https://api.example.com"
                 *       ]
                 *     }
                 */
                "application/json": components["schemas"]["CreateApplication"];
            };
        };
        responses: {
            /** @description Default Response */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ApplicationWithSecret"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    getApplication: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Application"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    updateApplication: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        /** @description The application type, ids, secret state and timestamps cannot change: the fields of a read answer may be sent back as read */
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "name": "Dashboard",
                 *       "redirectUris": [
                 *         "https://app.example.com/callback"
                 *       ],
                 *       "resources": []
                 *     }
                 */
                "application/json": components["schemas"]["UpdateApplication"];
            };
        };
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Application"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    deleteApplication: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    rotateApplicationSecret: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ApplicationWithSecret"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    listEndUsers: {
        parameters: {
            query: {
                /** @description Items per page */
                limit: number;
                /** @description Items to skip */
                offset: number;
                /** @description Only users in this application’s list */
                applicationId?: string;
                /** @description active: may sign in; blocked: may not */
                status?: "active" | "blocked";
                /** @description A part of the e-mail address or the name (case-insensitive) */
                search?: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EndUserList"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    getEndUser: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EndUser"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    createEndUserWithoutPassword: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "email": "ada@example.com",
                 *       "displayName": "Ada"
                 *     }
                 */
                "application/json": components["schemas"]["CreateEndUser"];
            };
        };
        responses: {
            /** @description Default Response */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CreatedEndUser"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    sendEndUserPasswordReset: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "applicationId": "0b6f3c1e-2f4a-4c69-9d1e-6f0d2a9b7c11"
                 *     }
                 */
                "application/json": components["schemas"]["SendPasswordReset"];
            };
        };
        responses: {
            /** @description Default Response */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["LinkDispatch"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    blockEndUser: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EndUser"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    unblockEndUser: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EndUser"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    deleteEndUserPermanently: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    listRoles: {
        parameters: {
            query: {
                /** @description Items per page */
                limit: number;
                /** @description Items to skip */
                offset: number;
                /** @description Only this application’s roles */
                applicationId?: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RoleList"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    createRole: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "applicationId": "0b6f3c1e-2f4a-4c69-9d1e-6f0d2a9b7c11",
                 *       "name": "editor",
                 *       "description": "Edits documents",
                 *       "permissions": [
                 *         "documents:read",
                 *         "documents:write"
                 *       ]
                 *     }
                 */
                "application/json": components["schemas"]["CreateRole"];
            };
        };
        responses: {
            /** @description Default Response */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Role"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    getRole: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Role"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    updateRole: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "name": "editor",
                 *       "description": "Edits documents",
                 *       "permissions": [
                 *         "documents:write"
                 *       ]
                 *     }
                 */
                "application/json": components["schemas"]["UpdateRole"];
            };
        };
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Role"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    deleteRole: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    listEndUserRoles: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EndUserRoles"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    assignEndUserRole: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The end-user */
                id: string;
                /** @description The role */
                roleId: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EndUserRoles"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    unassignEndUserRole: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The end-user */
                id: string;
                /** @description The role */
                roleId: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Not assigned (any more) */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    listAccessPolicies: {
        parameters: {
            query: {
                /** @description Items per page */
                limit: number;
                /** @description Items to skip */
                offset: number;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AccessPolicyList"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    createAccessPolicy: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "name": "Outside the office needs approval",
                 *       "action": "AllowWithApproval",
                 *       "priority": 10,
                 *       "ipRanges": [
                 *         "0.0.0.0/0",
                 *         "::/0"
                 *       ]
                 *     }
                 */
                "application/json": components["schemas"]["AccessPolicyInput"];
            };
        };
        responses: {
            /** @description Default Response */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AccessPolicy"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    getAccessPolicy: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AccessPolicy"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    replaceAccessPolicy: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "name": "Outside the office needs approval",
                 *       "action": "AllowWithApproval",
                 *       "priority": 10,
                 *       "ipRanges": [
                 *         "0.0.0.0/0",
                 *         "::/0"
                 *       ]
                 *     }
                 */
                "application/json": components["schemas"]["AccessPolicyInput"];
            };
        };
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AccessPolicy"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    deleteAccessPolicy: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    updateAccessPolicy: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "action": "Deny"
                 *     }
                 */
                "application/json": components["schemas"]["AccessPolicyPatch"];
            };
        };
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AccessPolicy"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    listAccessRequests: {
        parameters: {
            query: {
                /** @description Items per page */
                limit: number;
                /** @description Items to skip */
                offset: number;
                /** @description Only requests in this state */
                status?: "pending" | "approved" | "rejected" | "expired";
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AccessRequestList"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    getAccessRequest: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AccessRequest"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    approveAccessRequest: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "reason": "Contract confirmed"
                 *     }
                 */
                "application/json": components["schemas"]["AccessDecision"];
            };
        };
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AccessRequest"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    rejectAccessRequest: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "reason": "Contract confirmed"
                 *     }
                 */
                "application/json": components["schemas"]["AccessDecision"];
            };
        };
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AccessRequest"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    listSamlIdentityProviders: {
        parameters: {
            query: {
                /** @description Items per page */
                limit: number;
                /** @description Items to skip */
                offset: number;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SamlIdentityProviderList"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    createSamlIdentityProvider: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "name": "Acme Corp",
                 *       "entityId": "https://idp.acme.example/saml",
                 *       "ssoUrl": "https://idp.acme.example/saml/sso",
                 *       "certificate": "MIIC8DCCAdigAwIBAgIQ...",
                 *       "attributeMapping": {
                 *         "email": "email",
                 *         "name": "displayName"
                 *       }
                 *     }
                 */
                "application/json": components["schemas"]["SamlIdentityProviderInput"];
            };
        };
        responses: {
            /** @description Default Response */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SamlIdentityProvider"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    getSamlIdentityProvider: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SamlIdentityProvider"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    deleteSamlIdentityProvider: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    updateSamlIdentityProvider: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "certificate": "MIIC8DCCAdigAwIBAgIQ..."
                 *     }
                 */
                "application/json": components["schemas"]["SamlIdentityProviderPatch"];
            };
        };
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SamlIdentityProvider"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    listPlans: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PlanList"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    getSubscription: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Subscription"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    changePlan: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "planId": "pro"
                 *     }
                 */
                "application/json": components["schemas"]["ChangePlan"];
            };
        };
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Subscription"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    getUsage: {
        parameters: {
            query?: {
                /** @description First month (default: `to`, else the current month) (YYYY-MM, UTC) */
                from?: string;
                /** @description Last month (default: `from`, else the current month) (YYYY-MM, UTC) */
                to?: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Usage"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    listInvoices: {
        parameters: {
            query: {
                /** @description Items per page */
                limit: number;
                /** @description Items to skip */
                offset: number;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["InvoiceList"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    stripeWebhook: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PaymentWebhookAnswer"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    listReferrals: {
        parameters: {
            query: {
                /** @description Items per page */
                limit: number;
                /** @description Items to skip */
                offset: number;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ReferralList"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Too many requests (rate_limited); Retry-After says when to try again */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "crypto_busy",
                     *       "message": "Too many cryptographic operations of this tenant are waiting (64); retry shortly",
                     *       "retryAfterSeconds": 1
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    listCommissions: {
        parameters: {
            query: {
                /**
                 * @description The month (YYYY-MM)
                 * @example 2026-11
                 */
                period: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CommissionList"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Too many requests (rate_limited); Retry-After says when to try again */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "crypto_busy",
                     *       "message": "Too many cryptographic operations of this tenant are waiting (64); retry shortly",
                     *       "retryAfterSeconds": 1
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    createReferralCode: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "label": "Newsletter November"
                 *     }
                 */
                "application/json": components["schemas"]["CreateReferralCode"];
            };
        };
        responses: {
            /** @description Default Response */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ReferralCode"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Too many requests (rate_limited); Retry-After says when to try again */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "crypto_busy",
                     *       "message": "Too many cryptographic operations of this tenant are waiting (64); retry shortly",
                     *       "retryAfterSeconds": 1
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    listPartnerWebhookEndpoints: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PartnerWebhookEndpointList"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Too many requests (rate_limited); Retry-After says when to try again */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "crypto_busy",
                     *       "message": "Too many cryptographic operations of this tenant are waiting (64); retry shortly",
                     *       "retryAfterSeconds": 1
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    createPartnerWebhookEndpoint: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "url": "https://partner.example/kms-events"
                 *     }
                 */
                "application/json": components["schemas"]["CreatePartnerWebhookEndpoint"];
            };
        };
        responses: {
            /** @description Default Response */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PartnerWebhookEndpoint"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Too many requests (rate_limited); Retry-After says when to try again */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "crypto_busy",
                     *       "message": "Too many cryptographic operations of this tenant are waiting (64); retry shortly",
                     *       "retryAfterSeconds": 1
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    deletePartnerWebhookEndpoint: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Removed */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Too many requests (rate_limited); Retry-After says when to try again */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "crypto_busy",
                     *       "message": "Too many cryptographic operations of this tenant are waiting (64); retry shortly",
                     *       "retryAfterSeconds": 1
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    getPartnerWebhookSecret: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PartnerWebhookSecret"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Too many requests (rate_limited); Retry-After says when to try again */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "crypto_busy",
                     *       "message": "Too many cryptographic operations of this tenant are waiting (64); retry shortly",
                     *       "retryAfterSeconds": 1
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    getPartner: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Partner"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Too many requests (rate_limited); Retry-After says when to try again */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "crypto_busy",
                     *       "message": "Too many cryptographic operations of this tenant are waiting (64); retry shortly",
                     *       "retryAfterSeconds": 1
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    listPartnerApiKeys: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PartnerApiKeyList"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Too many requests (rate_limited); Retry-After says when to try again */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "crypto_busy",
                     *       "message": "Too many cryptographic operations of this tenant are waiting (64); retry shortly",
                     *       "retryAfterSeconds": 1
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    createPartnerApiKey: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "name": "CRM sync"
                 *     }
                 */
                "application/json": components["schemas"]["CreatePartnerApiKey"];
            };
        };
        responses: {
            /** @description Default Response */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CreatedPartnerApiKey"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict with the current state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_state_conflict",
                     *       "message": "A key in state Revoked cannot be used to encrypt",
                     *       "state": "Revoked"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Too many requests (rate_limited); Retry-After says when to try again */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "crypto_busy",
                     *       "message": "Too many cryptographic operations of this tenant are waiting (64); retry shortly",
                     *       "retryAfterSeconds": 1
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    revokePartnerApiKey: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Resource id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PartnerApiKey"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The caller lacks the scope (insufficient_scope) or the role (forbidden) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "insufficient_scope",
                     *       "message": "This API key lacks the scope keys:write",
                     *       "requiredScope": "keys:write"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found, or belongs to another tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "key_not_found",
                     *       "message": "Key not found"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Too many requests (rate_limited); Retry-After says when to try again */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "crypto_busy",
                     *       "message": "Too many cryptographic operations of this tenant are waiting (64); retry shortly",
                     *       "retryAfterSeconds": 1
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    listPartnerAudit: {
        parameters: {
            query: {
                /** @description Items per page */
                limit: number;
                /** @description Items to skip */
                offset: number;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Default Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PartnerAuditList"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Too many requests (rate_limited); Retry-After says when to try again */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "crypto_busy",
                     *       "message": "Too many cryptographic operations of this tenant are waiting (64); retry shortly",
                     *       "retryAfterSeconds": 1
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    signUpTenant: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "organizationName": "Acme Robotics",
                 *       "email": "ada@acme.example"
                 *     }
                 */
                "application/json": components["schemas"]["TenantSignup"];
            };
        };
        responses: {
            /** @description Default Response */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SignupRequested"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Too many requests (rate_limited); Retry-After says when to try again */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "crypto_busy",
                     *       "message": "Too many cryptographic operations of this tenant are waiting (64); retry shortly",
                     *       "retryAfterSeconds": 1
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    signUpPartner: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "organizationName": "Integrators Ltd",
                 *       "email": "lin@integrators.example"
                 *     }
                 */
                "application/json": components["schemas"]["PartnerSignup"];
            };
        };
        responses: {
            /** @description Default Response */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SignupRequested"];
                };
            };
            /** @description Invalid request (validation_failed, invalid_json, ...) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "validation_failed",
                     *       "message": "body/name must NOT have fewer than 1 characters",
                     *       "fields": [
                     *         {
                     *           "path": "body/name",
                     *           "message": "must NOT have fewer than 1 characters"
                     *         }
                     *       ]
                     *     }
                     */
                    "application/json": components["schemas"]["ValidationError"];
                };
            };
            /** @description Missing, unknown, expired or revoked API key or access token (unauthorized) */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "unauthorized",
                     *       "message": "A valid API key (X-Api-Key header) or access token (Authorization: Bearer) is required"
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Too many requests (rate_limited); Retry-After says when to try again */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    /**
                     * @example {
                     *       "error": "crypto_busy",
                     *       "message": "Too many cryptographic operations of this tenant are waiting (64); retry shortly",
                     *       "retryAfterSeconds": 1
                     *     }
                     */
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
}
