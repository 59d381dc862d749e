"use strict";

// aws-sdk v2 DocumentClient pointed at a local engine, as the original library's users build
// it. Loopback only; no metadata service; short timeouts.

process.env.AWS_EC2_METADATA_DISABLED = "true";
process.env.AWS_SDK_JS_SUPPRESS_MAINTENANCE_MODE_MESSAGE = "1";

const AWS = require("aws-sdk");

function documentClient({ endpoint, region, credentials })
{
    return new AWS.DynamoDB.DocumentClient(
        {
            endpoint,
            region,
            credentials: { accessKeyId: credentials.accessKeyId, secretAccessKey: credentials.secretAccessKey },
            maxRetries: 3,
            httpOptions: { connectTimeout: 1000, timeout: 5000 },
        }
    );
}

module.exports = { AWS, documentClient };
