"use strict";

// Placeholder replaced by the user-object transport.
module.exports = {
    create()
    {
        throw new Error("dynamodb objects with get/put/delete are not supported yet");
    }
};
