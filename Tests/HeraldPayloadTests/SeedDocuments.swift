// Generated from /work/shared/seeds/ by copying the listings verbatim (line ranges in the comments).
// Do not edit by hand: these are the documents as printed, errors included.

enum SeedDocuments {
    static let guide2011_example1 = "{\n  \"aps\" : { \"alert\" : \"Message received from Bob\" },\n  \"acme2\" : [ \"bang\", \"whiz\" ]\n}"
    static let guide2011_example2 = "{\n  \"aps\" : {\n    \"alert\" : { \"body\" : \"Bob wants to play poker\", \"action-loc-\n    key\" : \"PLAY\" },\n    \"badge\" : 5,\n    \"acme1\" : \"bar\",\n    \"acme2\" : [\n    \"bang\", \"whiz\" ] }\n}"
    static let guide2011_example3 = "{\n\"aps\" : {\n    \"alert\" : \"You got your emails.\",\n    \"badge\" : 9,\n    \"sound\" : \"bingbong.aiff\"\n},\n\"acme1\" : \"bar\",\n\"acme2\" : 42\n}"
    static let guide2011_example4 = "{\n    \"aps\" : {\n        \"alert\" : { \"loc-key\" : \"GAME_PLAY_REQUEST_FORMAT\", \"loc-args\" : [ \"Jenna\",\n\"Frank\" ] },\n        \"sound\" : \"chime\",\n    },\n    \"acme\" : \"foo\"\n}"
    static let guide2011_example5 = "{\n    \"aps\" : {\n    },\n    \"acme2\" : [ 5, 8 ]\n}"
    static let programmingGuide_example1 = "{\n  \"aps\" : { \"alert\" : \"Message received from Bob\" },\n  \"acme2\" : [ \"bang\", \"whiz\" ]\n}"
    static let programmingGuide_example2 = "{\n  \"aps\" : {\n    \"alert\" : { \"body\" : \"Bob wants to play poker\",\n    \"action-loc-key\" : \"PLAY\" },\n    \"badge\" : 5,\n    \"acme1\" : \"bar\",\n    \"acme2\" : [ \"bang\", \"whiz\" ] }\n}"
    static let programmingGuide_example3 = "{\n  \"aps\" : {\n    \"alert\" : \"You got your emails.\",\n\n        \"badge\" : 9,  \n        \"sound\" : \"bingbong.aiff\"  \n    },  \n    \"acme1\" : \"bar\",  \n    \"acme2\" : 42  \n}"
    static let programmingGuide_example4 = "{  \n    \"aps\" : {  \n        \"alert\" : { \"loc-key\" : \"GAME_PLAY_REQUEST_FORMAT\", \"loc-args\" : [ \"Jenna\",  \n\"Frank\"] },  \n        \"sound\" : \"chime\",  \n    },  \n    \"acme\" : \"foo\"  \n}"
    static let programmingGuide_example5 = "{  \n    \"aps\" : {  \n    },  \n    \"acme2\" : [ 5, 8 ]  \n}"
    static let reference_listing1 = "{\n“aps” : {\n“alert” : {\n“title” : “Game Request”,\n“subtitle” : “Five Card Draw”\n“body” : “Bob wants to play poker”,\n},\n“category” : “GAME_INVITATION”\n},\n“gameID” : “12345678”\n}"
    static let reference_listing2 = "{\n“aps” : {\n“badge” : 9\n“sound” : “bingbong.aiff”\n},\n“messageID” : “ABCDEFGHIJ”\n}"
    static let reference_listing3 = "{\n\"aps\" : {\n\"alert\" : {\n\"loc-key\" : \"GAME_PLAY_REQUEST_FORMAT\",\n\"loc-args\" : [ \"Shelly\", \"Rick\"]\n}\n}\n}"
}
